import { existsSync } from 'node:fs';
import { mkdir, rename as renameDir } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';

/** btrfs subvolume operations, each a metadata operation that shares blocks copy-on-write. */
export class Subvolumes {
  async create(target: string): Promise<void> {
    await mkdir(path.dirname(target), { recursive: true });
    await runCommand(['btrfs', 'subvolume', 'create', target]);
  }

  async snapshot(source: string, target: string, readOnly: boolean): Promise<void> {
    await mkdir(path.dirname(target), { recursive: true });
    await runCommand(['btrfs', 'subvolume', 'snapshot', ...(readOnly ? ['-r'] : []), source, target]);
  }

  async setReadOnly(target: string): Promise<void> {
    await runCommand(['btrfs', 'property', 'set', '-ts', target, 'ro', 'true']);
  }

  /** Deletes a subvolume (read-only ones too) if it exists. */
  async delete(target: string): Promise<void> {
    if (!existsSync(target)) return;
    await runCommand(['btrfs', 'subvolume', 'delete', target]);
  }

  /** Renames a subvolume within the filesystem (an atomic rename of its directory entry). */
  async rename(from: string, to: string): Promise<void> {
    await renameDir(from, to);
  }

  exists(target: string): boolean {
    return existsSync(target);
  }
}
