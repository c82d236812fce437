import { spawn, type SpawnOptions } from 'node:child_process';

export interface CommandResult {
  stdout: string;
  stderr: string;
  code: number;
}

export class CommandError extends Error {
  constructor(
    readonly argv: string[],
    readonly result: CommandResult,
  ) {
    super(`${argv.join(' ')} exited ${result.code}: ${(result.stderr || result.stdout).trim().slice(-2000)}`);
    this.name = 'CommandError';
  }
}

export interface RunOptions extends SpawnOptions {
  /** Resolve with the result instead of throwing on a non-zero exit. */
  allowFailure?: boolean;
  input?: string;
  /** Called with each line of stderr and stdout, for progress. */
  onLine?: (line: string) => void;
}

/** Runs a host command from an argv array (never a shell string) and collects its output. */
export function runCommand(argv: string[], options: RunOptions = {}): Promise<CommandResult> {
  const { allowFailure, input, onLine, ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], ...spawnOptions });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const keep = (sink: Buffer[]) => (chunk: Buffer) => {
      sink.push(chunk);
      if (onLine) for (const line of chunk.toString().split('\n')) if (line.trim()) onLine(line.trim());
    };
    child.stdout?.on('data', keep(out));
    child.stderr?.on('data', keep(err));
    child.on('error', (e) => reject(new Error(`cannot run ${argv[0]}: ${e.message}`)));
    child.on('close', (code, signal) => {
      const result = { stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), code: code ?? 128 + (signal ? 9 : 0) };
      if (result.code !== 0 && !allowFailure) reject(new CommandError(argv, result));
      else resolve(result);
    });
    if (input !== undefined) child.stdin?.end(input);
    else child.stdin?.end();
  });
}
