import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { CodeLanguage, CodeResultData, Execution } from '@space/sdk';
import { cliClient, output } from '../client.js';

/** File extensions of the binary MIME types a result may hold (base64 on the wire). */
const savedTypes: Record<string, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/svg+xml': 'svg', 'application/pdf': 'pdf' };

/** space run-code: a cell in the session's code interpreter, text printed, images saved. */
export function registerRunCodeCommand(program: Command): void {
  program
    .command('run-code <session> [file]')
    .description('run a cell in the session\'s code interpreter (template code-interpreter): state stays between runs; "-" or no file reads stdin')
    .option('-c, --code <code>', 'the code (instead of a file)')
    .option('--context <id>', "the context to run in (default: the language's own)")
    .option('--language <language>', 'python (default), javascript or bash')
    .option('--timeout <ms>', 'interrupt the cell after this long', (v) => Number(v))
    .option('--out <dir>', 'save images and PDFs of the results into this directory (default: the current one)')
    .option('--json', 'print the whole execution as JSON (images stay base64, nothing is saved)')
    .action(
      async (
        id: string,
        file: string | undefined,
        opts: { code?: string; context?: string; language?: CodeLanguage; timeout?: number; out?: string; json?: boolean },
      ) => {
        const code = opts.code ?? (await readCode(file));
        const session = cliClient(process.env).sessions.handle(id);
        const live = !opts.json;
        const execution = await session.runCode(code, {
          ...(opts.context ? { context: opts.context } : {}),
          ...(opts.language ? { language: opts.language } : {}),
          ...(opts.timeout ? { timeoutMs: opts.timeout } : {}),
          ...(live ? { onStdout: (t: string) => process.stdout.write(t), onStderr: (t: string) => process.stderr.write(t) } : {}),
        });
        if (opts.json) {
          output(true, execution, () => '');
        } else {
          await printResults(execution, opts.out ?? '.');
          if (execution.error) process.stderr.write(`${execution.error.traceback.join('\n') || `${execution.error.name}: ${execution.error.value}`}\n`);
        }
        if (execution.error) process.exitCode = 1;
      },
    );
}

async function readCode(file: string | undefined): Promise<string> {
  if (file && file !== '-') return readFile(file, 'utf8');
  if (process.stdin.isTTY) throw new Error('no code given: space run-code SESSION -c CODE, a FILE, or code on stdin');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Text results printed; images and PDFs written to `dir` (named by cell and result) and their paths printed. */
async function printResults(execution: Execution, dir: string): Promise<void> {
  for (const [index, result] of execution.results.entries()) {
    const saved = await saveBinaries(result, dir, `cell-${execution.executionCount ?? 0}-${index + 1}`);
    for (const file of saved) process.stdout.write(`[saved ${file}]\n`);
    const text = result.data['text/plain'];
    if (typeof text === 'string' && (saved.length === 0 || result.isMainResult)) process.stdout.write(`${text}\n`);
  }
}

async function saveBinaries(result: CodeResultData, dir: string, stem: string): Promise<string[]> {
  const saved: string[] = [];
  for (const [mime, extension] of Object.entries(savedTypes)) {
    const value = result.data[mime];
    if (typeof value !== 'string') continue;
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, `${stem}.${extension}`);
    await writeFile(file, mime === 'image/svg+xml' ? value : Buffer.from(value, 'base64'));
    saved.push(file);
  }
  return saved;
}
