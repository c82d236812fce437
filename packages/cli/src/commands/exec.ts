import { createReadStream, createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import type { ExecStream } from '@space/sdk';
import { Limits } from '@space/protocol';
import { cliClient, output } from '../client.js';

/** Above this much unsent stdin, reading the local stdin waits. */
const stdinHighWaterBytes = 4 * 1024 * 1024;

/** Sends the local stdin to a running command, then its end. */
async function pumpStdin(stream: ExecStream): Promise<void> {
  for await (const chunk of process.stdin) {
    stream.write(chunk as Buffer);
    while (stream.bufferedAmount > stdinHighWaterBytes) await new Promise((r) => setTimeout(r, 10));
  }
  stream.end();
}

/** The whole of a (piped) stdin as text, refused above `limit` bytes. */
async function readAll(input: NodeJS.ReadStream, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of input) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Error(`stdin is over ${limit} bytes: drop --json to stream it`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** exec (exit code passed through) and cp in both directions. */
export function registerExecCommands(program: Command): void {
  program
    .command('exec <session> <cmd...>')
    .description('run a command in the session; output streams live and the exit code is passed through')
    .option('--json', 'wait and print {exitCode, stdout, stderr} as JSON')
    .option('--cwd <dir>', 'working directory (default /workspace)')
    .option('--timeout <ms>', 'kill the command after this long', (v) => Number(v))
    .option('-i, --stdin', "send this terminal's stdin (a pipe or a file) to the command, then its end")
    .passThroughOptions()
    .action(async (id: string, cmd: string[], opts: { json?: boolean; cwd?: string; timeout?: number; stdin?: boolean }) => {
      const session = cliClient(process.env).sessions.handle(id);
      const words = cmd[0] === '--' ? cmd.slice(1) : cmd;
      if (words.length === 0) throw new Error('no command given: space exec SESSION -- COMMAND [ARGS...]');
      // One word is a shell string ('echo $HOME | wc'); several are an argv.
      const argv = words.length === 1 ? words[0]! : words;
      if (opts.json) {
        const stdin = opts.stdin ? await readAll(process.stdin, Limits.maxExecStdinBytes) : undefined;
        const result = await session.exec(argv, { cwd: opts.cwd, commandTimeoutMs: opts.timeout, stdin });
        output(true, result, () => '');
        process.exitCode = result.exitCode;
        return;
      }
      const stream = session.execStream(argv, { cwd: opts.cwd, commandTimeoutMs: opts.timeout });
      // Like `docker exec -i`: stdin is read only when asked for (interactive terminals: `space shell`).
      if (opts.stdin) void pumpStdin(stream);
      else stream.end();
      for await (const event of stream) {
        if (event.type === 'stdout') process.stdout.write(event.data);
        else if (event.type === 'stderr') process.stderr.write(event.data);
        else if (event.type === 'exit') process.exitCode = event.exitCode;
        else if (event.type === 'restored')
          process.stderr.write(
            `space: the sandbox died; the command goes on in ${event.sandboxId}, restored from a full checkpoint${event.repeatedBytes ? ` (its last ${event.repeatedBytes} bytes of output come again)` : ''}\n`,
          );
      }
      // The command may end before its input does.
      if (opts.stdin) process.stdin.destroy();
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
        const entry = await space.sessions.handle(dst[1]!).files.upload(dst[2]!, createReadStream(from));
        output(Boolean(opts.json), entry, () => `${from} → ${to} (${entry.size} bytes)`);
      } else {
        const stream = await space.sessions.handle(src![1]!).files.download(src![2]!);
        await pipeline(stream, createWriteStream(to));
        output(Boolean(opts.json), { from, to }, () => `${from} → ${to}`);
      }
    });
}
