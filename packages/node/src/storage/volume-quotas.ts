import { readFile } from 'node:fs/promises';
import { runCommand } from '../run-command.js';
import { qgroupRows } from './subvolumes.js';

/**
 * Turns on btrfs simple quotas, which hold session volumes and named volumes to their sizes. Simple
 * quotas charge an extent to the subvolume that wrote it, so a limit counts what was written there
 * (not the template's shared blocks). Full quotas, which this node used before, walk back-references
 * at every commit: under a burst of creates and deletes commits took seconds (max 12.6 s) and every
 * snapshot waited for them. A filesystem with full quotas is converted, keeping its limits. Where
 * the kernel (before 6.7) or btrfs-progs cannot, full quotas stay. Returns what is in force.
 * `sysfsDir`: the filesystem's `/sys/fs/btrfs/<uuid>`.
 */
export async function enableSimpleQuotas(mountPoint: string, sysfsDir: string): Promise<string> {
  const mode = await readFile(`${sysfsDir}/qgroups/mode`, 'utf8').then(
    (text) => text.trim(),
    () => null,
  );
  if (mode === 'squota') return 'simple quotas';
  const limits = mode === 'qgroup' ? await limitsOf(mountPoint) : [];
  if (mode === 'qgroup') await runCommand(['btrfs', 'quota', 'disable', mountPoint]);
  const simple = await runCommand(['btrfs', 'quota', 'enable', '--simple', mountPoint], { allowFailure: true });
  // A no-op where full quotas are on already (a kernel without the mode file).
  if (simple.code !== 0) await runCommand(['btrfs', 'quota', 'enable', mountPoint]);
  for (const { qgroup, bytes } of limits) await runCommand(['btrfs', 'qgroup', 'limit', String(bytes), qgroup, mountPoint]);
  const kept = mode === 'qgroup' ? ` (converted from full quotas, ${limits.length} limit(s) kept)` : '';
  if (simple.code === 0) return `simple quotas${kept}`;
  return `full quotas: simple ones need Linux 6.7 and btrfs-progs 6.7 or later (${(simple.stderr || simple.stdout).trim().split('\n')[0]})`;
}

/** The limits set on the own quota groups (`0/<id>`) of subvolumes that exist (full quotas keep deleted ones' groups). */
async function limitsOf(mountPoint: string): Promise<{ qgroup: string; bytes: number }[]> {
  const subvolumes = new Set(
    (await runCommand(['btrfs', 'subvolume', 'list', mountPoint])).stdout.split('\n').flatMap((line) => /^ID (\d+) /.exec(line)?.[1] ?? []),
  );
  const { stdout } = await runCommand(['btrfs', 'qgroup', 'show', '-r', '--raw', mountPoint]);
  return qgroupRows(stdout).flatMap(({ qgroup, limitBytes }) =>
    limitBytes !== null && subvolumes.has(qgroup.slice('0/'.length)) ? [{ qgroup, bytes: limitBytes }] : [],
  );
}
