import { readFileSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import { ProcessTable } from './process-table.js';
import { FileService } from './file-service.js';
import { SandboxPaths } from './sandbox-paths.js';
import { SandboxLayout } from '@space/protocol';
import { lineLog } from '@space/server-kit';
import { createDaemonRouter } from './server.js';
import { DaemonChannel } from './daemon-channel.js';

/**
 * The in-sandbox daemon. The node agent writes a one-time token file into the sandbox's rootfs; the
 * daemon reads it and deletes it before serving, so processes in the sandbox never find it on disk.
 */
function main(): void {
  const port = Number(process.env.SPACE_DAEMON_PORT ?? SandboxLayout.daemonPort);
  const tokenFile = process.env.SPACE_DAEMON_TOKEN_FILE ?? SandboxLayout.daemonTokenPath;
  const workdir = process.env.SPACE_WORKDIR ?? SandboxLayout.workdir;
  const ptyHelper = process.env.SPACE_PTY_HELPER ?? '/.space/space-pty';
  const token = readFileSync(tokenFile, 'utf8').trim();
  unlinkSync(tokenFile);
  if (token.length < 32) throw new Error('daemon token too short');

  // User processes get the sandbox environment without the daemon's own settings.
  const baseEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith('SPACE_DAEMON_') && key !== 'SPACE_PTY_HELPER' && key !== 'NODE_OPTIONS') baseEnv[key] = value;
  }
  const paths = new SandboxPaths(workdir);
  const processes = new ProcessTable(paths, baseEnv, ptyHelper);
  // The node agent closes idle connections first (its agent times out sooner), so closed
  // connections leave no TIME_WAIT endpoint in the sandbox, which a full checkpoint cannot save.
  const server = createServer({ requestTimeout: 0, keepAliveTimeout: 10 * 60_000 });
  const channel = new DaemonChannel(server, port);
  const router = createDaemonRouter({
    credentials: { token },
    channel,
    processes,
    files: new FileService(paths),
    paths,
    log: lineLog((m) => process.stderr.write(`space-daemon: ${m}\n`)),
  });
  server.on('request', (req, res) => void router.handle(req, res));
  server.on('upgrade', (req, socket, head) => void router.handleUpgrade(req, socket, head));
  void channel.listen().then(() => process.stdout.write(`space-daemon listening on ${port}\n`));
  const stop = (): void => {
    processes.killAll();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
