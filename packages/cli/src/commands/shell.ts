import type { Command } from 'commander';
import { cliClient } from '../client.js';

/** `space shell SESSION`: an interactive terminal in the sandbox; the shell's exit code is passed through. */
export function registerShellCommand(program: Command): void {
  program
    .command('shell <session>')
    .description('open an interactive shell (a PTY) in the session; exit the shell to leave')
    .option('--cmd <command>', 'run this instead of the default shell')
    .action(async (id: string, opts: { cmd?: string }) => {
      const session = cliClient(process.env).sessions.handle(id);
      const stdin = process.stdin;
      const interactive = stdin.isTTY && process.stdout.isTTY;
      const pty = session.pty({
        cmd: opts.cmd,
        cols: process.stdout.columns || 80,
        rows: process.stdout.rows || 24,
        env: { TERM: process.env.TERM ?? 'xterm-256color' },
      });
      const onResize = (): void => pty.resize(process.stdout.columns, process.stdout.rows);
      const onInput = (data: Buffer): void => pty.write(data);
      if (interactive) {
        stdin.setRawMode(true);
        process.stdout.on('resize', onResize);
      }
      stdin.on('data', onInput);
      stdin.on('end', () => pty.end());
      try {
        for await (const event of pty) {
          if (event.type === 'stdout' || event.type === 'stderr') process.stdout.write(event.data);
          else if (event.type === 'exit') process.exitCode = event.exitCode;
        }
      } finally {
        if (interactive) {
          stdin.setRawMode(false);
          process.stdout.off('resize', onResize);
        }
        stdin.off('data', onInput);
        stdin.pause();
      }
    });
}
