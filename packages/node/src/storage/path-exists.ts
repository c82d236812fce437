import { access } from 'node:fs/promises';

/**
 * Whether a path exists, asked off the event loop: a lookup in a btrfs directory waits while a
 * snapshot or delete in that directory commits (seconds under a burst of creates), and an
 * `existsSync` there stalled every call the process served (seen as "did not accept a connection").
 */
export function pathExists(target: string): Promise<boolean> {
  return access(target).then(
    () => true,
    () => false,
  );
}
