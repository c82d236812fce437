import type { Stats } from 'node:fs';
import type { FileStat } from '@space/protocol';

/** What an lstat says a path is, in the files API's words. */
export function fileTypeOf(stats: Stats): FileStat['type'] {
  return stats.isFile() ? 'file' : stats.isDirectory() ? 'directory' : stats.isSymbolicLink() ? 'symlink' : 'other';
}
