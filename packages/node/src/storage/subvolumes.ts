import { mkdir, readdir, rename as renameDir, rm } from 'node:fs/promises';
import path from 'node:path';
import { type CommandRunner, spawnedCommands } from '../run-command.js';
import { pathExists } from './path-exists.js';

/** A subvolume's transaction ids: the last that changed it, and the one that created it. */
export interface Generations {
  generation: number;
  createdAt: number;
}

/** The subvolumes' own groups (`0/<id>`) in `btrfs qgroup show -r --raw`: bytes referenced, and the limit (null: none). */
export function qgroupRows(stdout: string): { qgroup: string; bytes: number; limitBytes: number | null }[] {
  return stdout.split('\n').flatMap((line) => {
    // qgroupid rfer excl max_rfer [path], after the header lines
    const [qgroup, rfer, , maxRfer] = line.trim().split(/\s+/);
    if (!qgroup || !/^0\/\d+$/.test(qgroup)) return [];
    return [{ qgroup, bytes: Number(rfer), limitBytes: maxRfer && /^\d+$/.test(maxRfer) ? Number(maxRfer) : null }];
  });
}

/** btrfs subvolume operations, each a metadata operation that shares blocks copy-on-write. */
export class Subvolumes {
  constructor(private readonly commands: CommandRunner = spawnedCommands) {}

  async create(target: string): Promise<void> {
    await mkdir(path.dirname(target), { recursive: true });
    await this.commands.run(['btrfs', 'subvolume', 'create', target]);
  }

  /**
   * Snapshots `source` at `target`, which must not exist: given an existing directory, btrfs would
   * put the snapshot inside it (a session's root gaining a `ckp_…` directory, a volume that cannot
   * be deleted).
   */
  async snapshot(source: string, target: string, { readOnly }: { readOnly: boolean }): Promise<void> {
    if (await pathExists(target)) throw new Error(`cannot snapshot ${source}: ${target} already exists`);
    await mkdir(path.dirname(target), { recursive: true });
    await this.commands.run(['btrfs', 'subvolume', 'snapshot', ...(readOnly ? ['-r'] : []), source, target]);
  }

  /**
   * Makes `target` (new or existing) a writable snapshot of `source`. The copy is complete before the
   * old `target` goes: a failure leaves it as it was; a crash in between leaves `<target>.restoring`,
   * which the owner of `target` finishes or removes at start.
   */
  async replace(source: string, target: string): Promise<void> {
    const staging = `${target}.restoring`;
    await this.delete(staging);
    await this.snapshot(source, staging, { readOnly: false });
    await this.delete(target);
    await this.rename(staging, target);
  }

  /**
   * Deletes a subvolume (read-only ones too) if it exists. One with subvolumes nested in it (only a
   * crash or an old race leaves such a thing) cannot be deleted as it is: its children go first.
   */
  async delete(target: string): Promise<void> {
    if (!(await pathExists(target))) return;
    try {
      await this.commands.run(['btrfs', 'subvolume', 'delete', target]);
    } catch (err) {
      // Deleted meanwhile by a concurrent delete of the same subvolume (two API calls at once): done all the same.
      if (!(await pathExists(target))) return;
      const children = await this.childrenOf(target);
      if (children.length === 0) throw err;
      for (const child of children) await this.delete(child);
      await this.commands.run(['btrfs', 'subvolume', 'delete', target]);
    }
  }

  /** Deletes a directory of subvolumes (a checkpoint's or a base's copies of volumes): each as one, then the directory. */
  async deleteDirectoryOf(dir: string): Promise<void> {
    for (const name of await readdir(dir).catch(() => [] as string[])) await this.delete(path.join(dir, name));
    await rm(dir, { recursive: true, force: true });
  }

  /**
   * Holds the subvolume to `bytes` of data it references (shared blocks included, as a disk of that
   * size would), or lifts the limit (null). Writes past it fail with EDQUOT.
   */
  async limit(target: string, bytes: number | null): Promise<void> {
    await this.commands.run(['btrfs', 'qgroup', 'limit', bytes === null ? 'none' : String(Math.round(bytes)), target]);
  }

  /**
   * The data the subvolume references and its limit, from its own quota group (`btrfs qgroup show
   * -f`); null where quotas are not enabled.
   */
  async usage(target: string): Promise<{ bytes: number; limitBytes: number | null } | null> {
    const { code, stdout } = await this.commands.run(['btrfs', 'qgroup', 'show', '-rf', '--raw', target], { allowFailure: true });
    if (code !== 0) return null;
    // The subvolume's own group is the first row.
    const row = qgroupRows(stdout)[0];
    return row ? { bytes: row.bytes, limitBytes: row.limitBytes } : null;
  }

  /**
   * The data each subvolume of the filesystem mounted (its top level) at `root` references, by its
   * path under `root`: two commands for all of them. Null where quotas are not enabled.
   */
  async referencedUnder(root: string): Promise<Map<string, number> | null> {
    const list = await this.commands.run(['btrfs', 'subvolume', 'list', root], { allowFailure: true });
    const show = await this.commands.run(['btrfs', 'qgroup', 'show', '-r', '--raw', root], { allowFailure: true });
    if (list.code !== 0 || show.code !== 0) return null;
    const bytes = new Map(qgroupRows(show.stdout).map((row) => [row.qgroup.slice(2), row.bytes]));
    const referenced = new Map<string, number>();
    for (const line of list.stdout.split('\n')) {
      // ID <id> gen <gen> top level <id> path <path>
      const [, id, where] = /^ID (\d+) .* path (.+)$/.exec(line.trim()) ?? [];
      const found = id ? bytes.get(id) : undefined;
      if (where && found !== undefined) referenced.set(where, found);
    }
    return referenced;
  }

  /** Renames a subvolume within the filesystem (an atomic rename of its directory entry). */
  async rename(from: string, to: string): Promise<void> {
    await renameDir(from, to);
  }

  exists(target: string): Promise<boolean> {
    return pathExists(target);
  }

  /** Makes the subvolume read-only (as a snapshot taken with -r is). */
  async setReadOnly(target: string): Promise<void> {
    await this.commands.run(['btrfs', 'property', 'set', '-ts', target, 'ro', 'true']);
  }

  /** Whether the subvolume is read-only (snapshots taken read-only; a `btrfs receive` sets it last, when complete). */
  async isReadOnly(target: string): Promise<boolean> {
    const { stdout } = await this.commands.run(['btrfs', 'property', 'get', '-ts', target, 'ro'], { allowFailure: true });
    return stdout.trim() === 'ro=true';
  }

  /** Every read-only subvolume of the filesystem mounted (its top level) at `root`, as absolute paths: one command for all. */
  async readOnlyUnder(root: string): Promise<Set<string>> {
    const { stdout } = await this.commands.run(['btrfs', 'subvolume', 'list', '-r', root]);
    return new Set(
      stdout
        .split('\n')
        .flatMap((line) => / path (.+)$/.exec(line)?.[1] ?? [])
        .map((p) => path.join(root, p)),
    );
  }

  async generations(target: string): Promise<Generations> {
    const { stdout } = await this.commands.run(['btrfs', 'subvolume', 'show', target]);
    const field = (name: string): number => Number(new RegExp(`^\\s*${name}:\\s*(\\d+)`, 'm').exec(stdout)?.[1] ?? NaN);
    const found = { generation: field('Generation'), createdAt: field('Gen at creation') };
    if (!Number.isFinite(found.generation) || !Number.isFinite(found.createdAt)) throw new Error(`cannot read the generations of ${target}`);
    return found;
  }

  /** Commits the filesystem's pending changes, so generations count every write made so far. */
  async sync(target: string): Promise<void> {
    await this.commands.run(['btrfs', 'filesystem', 'sync', target]);
  }

  /** The subvolumes directly inside `target` (btrfs names them from the filesystem's top level). */
  private async childrenOf(target: string): Promise<string[]> {
    const { stdout } = await this.commands.run(['btrfs', 'subvolume', 'list', '-o', target], { allowFailure: true });
    const inner = stdout.split('\n').flatMap((line) => / path (.+)$/.exec(line)?.[1] ?? []);
    if (inner.length === 0) return [];
    const own = (await this.commands.run(['btrfs', 'subvolume', 'show', target])).stdout.split('\n')[0]!.trim();
    return inner.filter((p) => p.startsWith(`${own}/`)).map((p) => path.join(target, p.slice(own.length + 1)));
  }
}
