import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { cliClient, output } from '../client.js';

/** exec (exit code passed through) and cp in both directions. */
export function registerExecCommands(program: Command): void {
  program
    .command('exec <session> <cmd...>')
    .description('run a command in the session; output streams live and the exit code is passed through')
    .option('--json', 'wait and print {exitCode, stdout, stderr} as JSON')
    .option('--cwd <dir>', 'working directory (default /workspace)')
    .option('--timeout <ms>', 'kill the command after this long', (v) => Number(v))
    .passThroughOptions()
    .action(async (id: string, cmd: string[], opts: { json?: boolean; cwd?: string; timeout?: number }) => {
      const session = await cliClient(process.env).sessions.get(id);
      const words = cmd[0] === '--' ? cmd.slice(1) : cmd;
      if (words.length === 0) throw new Error('no command given: space exec SESSION -- COMMAND [ARGS...]');
      // One word is a shell string ('echo $HOME | wc'); several are an argv.
      const argv = words.length === 1 ? words[0]! : words;
      if (opts.json) {
        const result = await session.exec(argv, { cwd: opts.cwd, commandTimeoutMs: opts.timeout });
        output(true, result, () => '');
        process.exitCode = result.exitCode;
        return;
      }
      const stream = session.execStream(argv, { cwd: opts.cwd, commandTimeoutMs: opts.timeout });
      stream.end();
      for await (const event of stream) {
        if (event.type === 'stdout') process.stdout.write(event.data);
        else if (event.type === 'stderr') process.stderr.write(event.data);
        else if (event.type === 'exit') process.exitCode = event.exitCode;
      }
    });

  program
    .command('cp <from> <to>')
    .description('copy a file: "SESSION:/path local" downloads, "local SESSION:/path" uploads (streamed)')
    .option('--json', 'print JSON')
    .action(async (from: string, to: string, opts: { json?: boolean }) => {
      const remote = /^(ses_[a-z0-9]+):(.+)$/;
      const space = cliClient(process.env);
      const src = remote.exec(from);
      const dst = remote.exec(to);
      if (Boolean(src) === Boolean(dst)) throw new Error('exactly one side must be SESSION:/path');
      if (dst) {
        const entry = await (await space.sessions.get(dst[1]!)).files.upload(dst[2]!, createReadStream(from));
        output(Boolean(opts.json), entry, () => `${from} → ${to} (${entry.size} bytes)`);
      } else {
        const stream = await (await space.sessions.get(src![1]!)).files.download(src![2]!);
        await pipeline(stream, createWriteStream(to));
        output(Boolean(opts.json), { from, to }, () => `${from} → ${to}`);
      }
    });
}
