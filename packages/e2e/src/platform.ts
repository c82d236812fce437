import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const cliMain = path.join(repoRoot, 'packages/cli/dist/main.js');

/** Data directory shared by the end-to-end tests, so templates are built once per machine. */
export const testDataDir = process.env.SPACE_TEST_DATA_DIR ?? '/var/lib/space-test';

export interface RunningPlatform {
  url: string;
  adminKey: string;
  dataDir: string;
  process: ChildProcess;
  output: () => string;
  /** SIGTERM and wait: the platform stops its sandboxes and unmounts its storage. */
  stop(): Promise<number | null>;
}

/** Starts `space <command>` (by default `up`) as a child process, as a user would, and waits until it serves. */
export async function startPlatform(
  options: { dataDir?: string; env?: Record<string, string>; command?: string; readyPattern?: RegExp; adminKey?: string } = {},
): Promise<RunningPlatform> {
  const dataDir = options.dataDir ?? testDataDir;
  const adminKey = options.adminKey ?? `test-admin-${process.pid}-${Date.now()}`;
  const child = spawn(process.execPath, [cliMain, options.command ?? 'up'], {
    // No warm pool or template images unless a test asks: their boots would compete with what a test measures.
    env: {
      ...process.env,
      SPACE_DATA_DIR: dataDir,
      SPACE_PORT: '0',
      SPACE_API_KEY: adminKey,
      SPACE_QUIET: '1',
      SPACE_POOL_SIZE: '0',
      SPACE_TEMPLATE_IMAGES: '0',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const pattern = options.readyPattern ?? /SPACE is up: (http:\/\/[^\s]+)/;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`platform did not start within 600 s:\n${output}`)), 600_000);
    const check = (): void => {
      const match = pattern.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`platform exited with ${code} before serving:\n${output}`));
    });
  });
  return {
    url,
    adminKey,
    dataDir,
    process: child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  };
}
