import path from 'node:path';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { FileChange, SessionHandle } from '@space/sdk';
import { EventType, type FilesystemEventSchema } from '../gen/filesystem_pb.js';

/**
 * A change SPACE's watch reported under `root`, as envd's filesystem event: its name relative to
 * `root`, and a "rename" (created, deleted or moved) told apart by whether the entry is there now.
 * Null for a change below a subdirectory when the watch is not recursive.
 */
export async function filesystemEvent(
  sandbox: SessionHandle,
  root: string,
  change: FileChange,
  recursive: boolean,
): Promise<MessageInitShape<typeof FilesystemEventSchema> | null> {
  const name = path.isAbsolute(change.path) ? path.relative(root, change.path) : change.path;
  if (!recursive && name.includes('/')) return null;
  if (change.event === 'change') return { name, type: EventType.WRITE };
  const exists = await sandbox.files.stat(path.posix.join(root, name)).then(
    () => true,
    () => false,
  );
  return { name, type: exists ? EventType.CREATE : EventType.REMOVE };
}
