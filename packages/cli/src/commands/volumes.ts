import type { Command } from 'commander';
import type { VolumeData } from '@space/sdk';
import { cliClient, output } from '../client.js';

function line(v: VolumeData): string {
  const mounts = v.mounts.map((m) => `${m.sessionId}:${m.path}${m.readOnly ? ':ro' : ''}`).join(' ') || '-';
  return `${v.name.padEnd(28)} ${`${v.sizeGb} GB`.padEnd(10)} ${v.nodeId.padEnd(20)} ${mounts}`;
}

/** `NAME:PATH[:ro]`, as `space create --volume` takes it. */
export function parseVolumeFlag(flag: string): { name: string; path: string; readOnly: boolean } {
  const match = /^([^:]+):([^:]+)(?::(ro|rw))?$/.exec(flag);
  if (!match) throw new Error(`--volume takes NAME:PATH or NAME:PATH:ro, not ${JSON.stringify(flag)}`);
  return { name: match[1]!, path: match[2]!, readOnly: match[3] === 'ro' };
}

/** volume create/ls/get/rm/snapshot/snapshots: the tenant's volumes. */
export function registerVolumeCommands(program: Command): void {
  const volume = program
    .command('volume')
    .description('volumes: directories with a size of their own that outlive sessions (mount with "space create --volume NAME:PATH")');
  volume
    .command('create <name>')
    .description('create a volume, empty or from one of its snapshots')
    .option('--size <gb>', 'most data it holds, GB', (v) => Number(v), 10)
    .option('--from-snapshot <snapshot>', 'start as a copy of this volume snapshot')
    .option('--json', 'print the volume as JSON')
    .action(async (name: string, opts: { size: number; fromSnapshot?: string; json?: boolean }) => {
      const made = await cliClient(process.env).volumes.create({ name, sizeGb: opts.size, fromSnapshot: opts.fromSnapshot });
      output(Boolean(opts.json), made, () => `volume ${made.name} (${made.sizeGb} GB) on ${made.nodeId}`);
    });
  volume
    .command('ls')
    .description('list your volumes and the sessions mounting each')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const volumes = await cliClient(process.env).volumes.list();
      output(Boolean(opts.json), volumes, () => volumes.map(line).join('\n') || 'no volumes');
    });
  volume
    .command('get <name>')
    .description('one volume, with the bytes it holds now')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const found = await cliClient(process.env).volumes.get(name);
      output(Boolean(opts.json), found, () => `${line(found)}\nused: ${found.usedBytes ?? 'unknown'} bytes`);
    });
  volume
    .command('rm <name>')
    .description('delete a volume and its snapshots (refused while sessions mount it)')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      await cliClient(process.env).volumes.delete(name);
      output(Boolean(opts.json), { deleted: name }, () => `deleted volume ${name}`);
    });
  volume
    .command('snapshot <name>')
    .description('take a read-only snapshot of a volume; prints its id ("space volume create NEW --from-snapshot ID" starts from it)')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const snapshot = await cliClient(process.env).volumes.snapshot(name);
      output(Boolean(opts.json), snapshot, () => snapshot.id);
    });
  volume
    .command('snapshots <name>')
    .description("list a volume's snapshots")
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      const snapshots = await cliClient(process.env).volumes.snapshots(name);
      output(Boolean(opts.json), snapshots, () => snapshots.map((s) => `${s.id}  ${s.createdAt}`).join('\n') || 'no snapshots');
    });
}
