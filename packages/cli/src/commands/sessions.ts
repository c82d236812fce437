import type { Command } from 'commander';
import type { SessionData } from '@space/sdk';
import { parseVolumeFlag } from './volumes.js';
import { cliClient, output, parseNameValues } from '../client.js';
import { egressOptions, policyFromFlags, secretGrantsFrom, type EgressFlags } from './egress.js';
import { checkpointPath, listCheckpointDirectory } from './checkpoint-files.js';

function line(s: SessionData): string {
  return `${s.id}  ${s.status.padEnd(8)} ${s.template.padEnd(6)} ${s.sandbox?.id ?? '-'}  ${s.createdAt}`;
}

/** create, ls, get, rm, kill-sandbox, pause, ports, preview. */
export function registerSessionCommands(program: Command): void {
  egressOptions(program.command('create'))
    .description('create a session (and its sandbox); prints the session id')
    .option(
      '-s, --secret <name...>',
      'secrets the sandbox may use: NAME (env var NAME holds its placeholder) or NAME=SECRET (secret SECRET under env var NAME)',
      [],
    )
    .option('-t, --template <name>', 'template: base, tiny, code-interpreter or one of yours ("space template ls")', 'base')
    .option('-e, --env <NAME=VALUE...>', 'environment variables', [])
    .option('--checkpoint-interval <sec>', 'seconds between automatic fs checkpoints (0: off)', (v) => Number(v))
    .option('--full-checkpoint-interval <sec>', 'seconds between automatic full (memory) checkpoints (0: off)', (v) => Number(v))
    .option('--idle-timeout <sec>', 'seconds without calls before the sandbox is checkpointed and stopped (0: never)', (v) => Number(v))
    .option('--code-checkpoint-delay <ms>', 'after a code cell, ms of quiet before a full checkpoint holds the kernels (default 1000; 0: off)', (v) =>
      Number(v),
    )
    .option('--disk <gb>', 'disk the session may fill, GB (default: the platform\'s, see "space limits")', (v) => Number(v))
    .option('--memory <mb>', 'memory, MB (default 1024; past it the biggest process is killed, the sandbox lives)', (v) => Number(v))
    .option('--cpus <n>', 'CPUs (default 1)', (v) => Number(v))
    .option('--pids <n>', 'processes (default 1024; past it a fork fails with EAGAIN)', (v) => Number(v))
    .option('-v, --volume <spec...>', 'volumes to mount as NAME:PATH or NAME:PATH:ro ("space volume create" first)', [])
    .option('--json', 'print the session as JSON')
    .action(
      async (
        opts: EgressFlags & {
          template: string;
          env: string[];
          secret: string[];
          checkpointInterval?: number;
          fullCheckpointInterval?: number;
          idleTimeout?: number;
          codeCheckpointDelay?: number;
          disk?: number;
          memory?: number;
          cpus?: number;
          pids?: number;
          volume: string[];
          json?: boolean;
        },
      ) => {
        if (!opts.json) process.stderr.write(`creating a ${opts.template} session…\n`);
        const resources = Object.fromEntries(
          Object.entries({ diskGb: opts.disk, memoryMb: opts.memory, cpus: opts.cpus, pids: opts.pids }).filter(([, v]) => v !== undefined),
        );
        const session = await cliClient(process.env).sessions.create({
          template: opts.template,
          env: parseNameValues(opts.env, '--env'),
          checkpointIntervalSec: opts.checkpointInterval,
          fullCheckpointIntervalSec: opts.fullCheckpointInterval,
          idleTimeoutSec: opts.idleTimeout,
          codeCheckpointDelayMs: opts.codeCheckpointDelay,
          ...(Object.keys(resources).length === 0 ? {} : { resources }),
          secrets: secretGrantsFrom(opts.secret),
          egress: policyFromFlags(opts),
          volumes: opts.volume.map(parseVolumeFlag),
        });
        output(Boolean(opts.json), session.data, () => session.id);
      },
    );

  program
    .command('ls [checkpointPath]')
    .description('list sessions; with "CHECKPOINT:dir", a directory as it was in a checkpoint (no sandbox starts)')
    .option('--json', 'print JSON')
    .action(async (target: string | undefined, opts: { json?: boolean }) => {
      if (target !== undefined) {
        const at = checkpointPath(target);
        if (!at) throw new Error(`expected CHECKPOINT:dir (ckp_…:/workspace), got ${JSON.stringify(target)}`);
        return listCheckpointDirectory(at, Boolean(opts.json));
      }
      const sessions = await cliClient(process.env).sessions.list();
      output(
        Boolean(opts.json),
        sessions.map((s) => s.data),
        () => (sessions.length ? sessions.map((s) => line(s.data)).join('\n') : 'no sessions'),
      );
    });

  program
    .command('get <session>')
    .description('show a session with its sandbox history and checkpoints')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const session = await cliClient(process.env).sessions.get(id);
      output(Boolean(opts.json), session.data, () =>
        [
          line(session.data),
          ...(session.data.sandboxHistory ?? []).map((h) => `  sandbox ${h.id} ${h.startedAt} → ${h.endedAt ?? 'now'} ${h.endReason ?? ''}`),
        ].join('\n'),
      );
    });

  program
    .command('rm <session...>')
    .description('delete sessions, their sandboxes, volumes and checkpoints')
    .option('--json', 'print JSON')
    .action(async (ids: string[], opts: { json?: boolean }) => {
      const space = cliClient(process.env);
      for (const id of ids) await space.sessions.handle(id).delete();
      output(Boolean(opts.json), { deleted: ids }, () => `deleted ${ids.join(' ')}`);
    });

  program
    .command('kill-sandbox <session>')
    .description('kill only the sandbox; the session resumes on its next call')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      await cliClient(process.env).sessions.handle(id).killSandbox();
      output(Boolean(opts.json), { killed: id }, () => `killed the sandbox of ${id}; the session resumes on its next call`);
    });

  program
    .command('pause <session>')
    .description('checkpoint the sandbox (full where it can be, else fs) and stop it; the next call resumes the session')
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const checkpoint = await cliClient(process.env).sessions.handle(id).pause();
      output(Boolean(opts.json), checkpoint, () => `paused ${id} (${checkpoint.kind} checkpoint ${checkpoint.id}); the next call resumes it`);
    });

  program
    .command('ports <session>')
    .description("the TCP ports something listens on in the session's sandbox")
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { json?: boolean }) => {
      const ports = await cliClient(process.env).sessions.handle(id).ports();
      output(Boolean(opts.json), { ports }, () => ports.map((p) => `${p.port}  ${p.address}`).join('\n') || 'nothing listens');
    });

  program
    .command('preview <session> <port>')
    .description(
      'a URL for a port of the session that works in a browser without a key (until it expires); --revoke ends every one of the port; --public opens the port to anyone',
    )
    .option('--ttl <seconds>', 'how long the URL works', '3600')
    .option('--revoke', "revoke the port's preview URLs instead")
    .option('--public', 'make the port public: its URLs work for anyone, without a token')
    .option('--private', 'make a public port private again')
    .option('--json', 'print JSON')
    .action(async (id: string, port: string, opts: { ttl: string; revoke?: boolean; public?: boolean; private?: boolean; json?: boolean }) => {
      const session = cliClient(process.env).sessions.handle(id);
      if (opts.revoke) {
        const revoked = await session.revokePreviews(Number(port));
        return output(Boolean(opts.json), { revoked }, () => `revoked ${revoked} preview URL(s) of port ${port}`);
      }
      if (opts.public || opts.private) {
        const changed = await session.setPortPublic(Number(port), Boolean(opts.public));
        return output(
          Boolean(opts.json),
          { publicPorts: changed.data.publicPorts },
          () => `public ports of ${id}: ${changed.data.publicPorts.join(', ') || 'none'}`,
        );
      }
      const preview = await session.preview(Number(port), { ttlSec: Number(opts.ttl) });
      output(Boolean(opts.json), preview, () => `${preview.hostUrl ?? preview.url}\n(works until ${preview.expiresAt})`);
    });
}
