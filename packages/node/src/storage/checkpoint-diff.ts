import { spawn } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { type DiffEntry, ErrorCode, type FileStat, SpaceError } from '@space/protocol';
import { fileTypeOf } from './file-types.js';
import { finished } from './child-pipes.js';
import { type SendCommand, sendCommands } from './send-stream.js';

/** The most paths one diff follows: past it the diff is refused as too large (the stream is read whole to be right). */
export const maxDiffPaths = 200_000;

/** What the stream did to one object (a file, directory, link…) under its current name. */
interface Tracked {
  /** Its path in the first checkpoint; null for one made since. */
  origin: string | null;
  type?: FileStat['type'];
  content: boolean;
  mode: boolean;
}

/**
 * Replays a send stream's names: renames (of directories with all under them), links, unlinks, and
 * what was written or chmod'ed, so that each object ends under its final name with where it was.
 */
class NameReplay {
  private readonly named = new Map<string, Tracked>();
  /** First-checkpoint paths whose name went away (unlinked, removed or renamed from). */
  private readonly lost = new Set<string>();

  apply(command: SendCommand): void {
    switch (command.kind) {
      case 'create':
        this.named.set(command.path, { origin: null, type: command.type, content: true, mode: false });
        break;
      case 'rename': {
        const moved = this.at(command.path);
        if (moved.origin) this.lost.add(moved.origin);
        this.named.delete(command.path);
        // Everything tracked under a renamed directory moves with it.
        for (const [name, tracked] of [...this.named])
          if (name.startsWith(`${command.path}/`)) {
            this.named.delete(name);
            this.named.set(command.to + name.slice(command.path.length), tracked);
          }
        this.named.set(command.to, moved);
        break;
      }
      case 'link':
        this.named.set(command.path, this.at(command.target));
        break;
      case 'unlink':
      case 'rmdir': {
        const gone = this.at(command.path);
        if (gone.origin) this.lost.add(gone.origin);
        this.named.delete(command.path);
        break;
      }
      case 'write':
        this.at(command.path).content = true;
        break;
      default:
        this.at(command.path).mode = true;
    }
    if (this.named.size > maxDiffPaths)
      throw new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, `the checkpoints differ in more than ${maxDiffPaths} paths: too many to list`);
  }

  /** What differs: each object under its final name with how it changed, and the first checkpoint's paths nothing holds any more. */
  changes(): { name: string | null; tracked: Tracked; change: DiffEntry['change'] }[] {
    const held = new Set<string>();
    const found: { name: string | null; tracked: Tracked; change: DiffEntry['change'] }[] = [];
    for (const [name, tracked] of this.named) {
      if (tracked.origin) held.add(tracked.origin);
      // A second name of an object still at its own (a hard link made since) is new; a moved one is renamed.
      const stillThere = tracked.origin !== null && this.named.get(tracked.origin) === tracked;
      if (tracked.origin === null || (tracked.origin !== name && stillThere)) found.push({ name, tracked, change: 'added' });
      else if (tracked.origin !== name) found.push({ name, tracked, change: 'renamed' });
      else if (tracked.content) found.push({ name, tracked, change: 'modified' });
      else if (tracked.mode) found.push({ name, tracked, change: 'mode' });
    }
    const byName = new Map(found.map((f) => [f.name, f]));
    for (const origin of this.lost) {
      if (held.has(origin)) continue;
      // A path replaced by a new file (an atomic write: a new file renamed over it) was modified, not removed and added again.
      const replacement = byName.get(origin);
      if (replacement?.change === 'added') Object.assign(replacement, { tracked: { ...replacement.tracked, origin }, change: 'modified' });
      else if (!this.named.has(origin)) found.push({ name: null, tracked: { origin, content: false, mode: false }, change: 'removed' });
    }
    return found;
  }

  /** The object now named `name`: tracked already, or one of the first checkpoint's, at its path there (under any renamed directory). */
  private at(name: string): Tracked {
    const known = this.named.get(name);
    if (known) return known;
    let origin = name;
    for (let dir = path.posix.dirname(name); dir !== '.' && dir !== '/'; dir = path.posix.dirname(dir)) {
      const parent = this.named.get(dir);
      if (parent) {
        // Under a directory made since, a name is new too (a creation tracked it already, but be safe).
        origin = parent.origin === null ? '' : parent.origin + name.slice(dir.length);
        break;
      }
    }
    const tracked: Tracked = { origin: origin || null, content: false, mode: false };
    this.named.set(name, tracked);
    return tracked;
  }
}

/**
 * What differs between two read-only snapshots of one lineage (`from`, `to`: their roots), from
 * btrfs's own change tracking: `btrfs send --no-data -p from to` walks only the trees' differences,
 * so a one-file change in a large volume answers in milliseconds. Sorted by path.
 */
export async function diffSnapshots(from: string, to: string): Promise<DiffEntry[]> {
  const child = spawn('btrfs', ['send', '--no-data', '--proto', '1', '-q', '-p', from, to], { stdio: ['ignore', 'pipe', 'pipe'] });
  const done = finished(child, 'btrfs send --no-data');
  const replay = new NameReplay();
  try {
    for await (const command of sendCommands(child.stdout!)) replay.apply(command);
    await done;
  } catch (err) {
    child.kill();
    await done.catch(() => undefined);
    throw err;
  }
  const entries: DiffEntry[] = [];
  for (const { name, tracked, change } of replay.changes()) {
    // Kernel names: real directories all the way down, no `..`; lstat never follows the last one.
    const before = tracked.origin === null || change === 'added' ? null : await lstat(path.join(from, tracked.origin)).catch(() => null);
    const after = name === null ? null : await lstat(path.join(to, name)).catch(() => null);
    const stats = after ?? before;
    const type = stats ? fileTypeOf(stats) : (tracked.type ?? 'other');
    entries.push({
      path: `/${name ?? tracked.origin}`,
      change,
      type,
      ...(change === 'renamed' ? { from: `/${tracked.origin}` } : {}),
      sizeBefore: before?.size ?? null,
      sizeAfter: after?.size ?? null,
    });
  }
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
