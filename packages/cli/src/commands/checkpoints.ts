import type { Command } from 'commander';
import type { CheckpointData } from '@space/sdk';
import { cliClient, output } from '../client.js';
import { secretGrantsFrom } from './egress.js';

const line = (c: CheckpointData): string =>
  `${c.id}  ${c.kind.padEnd(4)}  ${c.trigger.padEnd(6)} ${c.createdAt}${c.kind === 'full' ? `  memory ${((c.sizeBytes ?? 0) / 1e6).toFixed(1)} MB, paused ${c.pauseMs} ms` : ''}`;

/** checkpoint, checkpoints, fork, restore. */
export function registerCheckpointCommands(program: Command): void {
  program
    .command('checkpoint <session>')
    .description('take a checkpoint (files; with --full also memory and processes); prints its id')
    .option(
      '--full',
      'also save memory and running processes (refused while a stream is attached or a connection with the outside is open: an fs checkpoint is taken instead)',
    )
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { full?: boolean; json?: boolean }) => {
      if (opts.full && !opts.json) process.stderr.write('saving memory and processes (the sandbox pauses for a moment)…\n');
      const checkpoint = await cliClient(process.env)
        .sessions.handle(id)
        .checkpoint({ kind: opts.full ? 'full' : 'fs' });
      output(Boolean(opts.json), checkpoint, () =>
        checkpoint.kind === 'full'
          ? `${checkpoint.id}  (memory ${((checkpoint.sizeBytes ?? 0) / 1e6).toFixed(1)} MB, paused ${checkpoint.pauseMs} ms)`
          : checkpoint.id,
      );
    });

  program
    .command('checkpoints <session>')
    .description("list a session's checkpoints, oldest first")
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const list = await cliClient(process.env).sessions.handle(id).checkpoints();
      output(Boolean(opts.json), list, () => (list.length ? list.map(line).join('\n') : 'no checkpoints'));
    });

  program
    .command('fork <checkpoint>')
    .description('start new sessions from a checkpoint; prints their ids')
    .option('-n, --count <n>', 'how many', (v) => Number(v), 1)
    .option('-s, --secret <name...>', "the forks' secrets instead of their parent's: NAME, or NAME=SECRET (secret SECRET under env var NAME)")
    .option('--no-secrets', 'the forks get no secrets')
    .option('--json', 'print JSON')
    .action(async (checkpointId: string, opts: { count: number; secret?: string[]; secrets: boolean; json?: boolean }) => {
      if (!opts.json) process.stderr.write(`forking ${opts.count} session(s)…\n`);
      const secrets = opts.secrets ? opts.secret && secretGrantsFrom(opts.secret) : [];
      const forks = await cliClient(process.env).checkpoints.fork(checkpointId, { count: opts.count, secrets });
      output(
        Boolean(opts.json),
        forks.map((f) => f.data),
        () => forks.map((f) => f.id).join('\n'),
      );
    });

  program
    .command('restore <session> <checkpoint>')
    .description("reset a session to a checkpoint of its lineage (its own or a fork's); with --path, put back only that file or directory")
    .option('--volumes', "also put its read-write volumes back to the checkpoint's copies (by default volumes keep their files)")
    .option('--path <path>', 'only this file or directory, written into the running session (an fs checkpoint is taken first, to undo it)')
    .option('--to <path>', 'with --path: where to put it (default: the same path)')
    .option('--json', 'print JSON')
    .action(async (id: string, checkpointId: string, opts: { volumes?: boolean; path?: string; to?: string; json?: boolean }) => {
      const handle = cliClient(process.env).sessions.handle(id);
      if (opts.path !== undefined) {
        const restored = await handle.files.restore(checkpointId, opts.path, opts.to === undefined ? {} : { to: opts.to });
        return output(
          Boolean(opts.json),
          restored,
          () =>
            `${restored.path} restored from ${checkpointId} (${restored.files} files, ${restored.directories} directories, ${restored.symlinks} links); undo: space restore ${id} ${restored.undoCheckpointId}`,
        );
      }
      const session = await handle.restore(checkpointId, { restoreVolumes: Boolean(opts.volumes) });
      output(Boolean(opts.json), session.data, () => `${id} restored to ${checkpointId}`);
    });
}
