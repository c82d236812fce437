import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { processAlive, signalAndWait } from '@space/server-kit';
import { processesOf } from './host-state.js';

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
  options: {
    dataDir?: string;
    env?: Record<string, string>;
    command?: string;
    readyPattern?: RegExp;
    adminKey?: string;
    /** How long it may take to serve (templates are built on a first start: minutes). */
    readyTimeoutMs?: number;
  } = {},
): Promise<RunningPlatform> {
  const dataDir = options.dataDir ?? testDataDir;
  const readyTimeoutMs = options.readyTimeoutMs ?? 600_000;
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
  // A platform never outlives its test file: a test that timed out or threw before stopping it would
  // leave it holding the shared data directory, and every later file's platform would refuse to
  // start (a CI run once failed 19 tests that way).
  const stopOnExit = (): void => stopBeforeExit(child);
  process.once('exit', stopOnExit);
  child.once('exit', () => process.off('exit', stopOnExit));
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const pattern = options.readyPattern ?? /SPACE is up: (http:\/\/[^\s]+)/;
  const url = await new Promise<string>((resolve, reject) => {
    // One that never serves is SIGKILLed, not left holding the data directory.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`platform did not start within ${readyTimeoutMs / 1000} s (SIGKILLed):\n${output}`));
    }, readyTimeoutMs);
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
    stop: () => stopChild(child, dataDir, () => output),
  };
}

/** How long a platform left running when its test file exits is given to stop after SIGTERM before SIGKILL. */
const exitStopMs = 60_000;

/**
 * From an exit handler, where nothing asynchronous runs: SIGTERM, then a synchronous wait until the
 * platform has exited (a zombie, as no one reaps it here: init does once this file is gone), so it
 * stops its sandboxes and unmounts before the next file starts; SIGKILL if it takes over `exitStopMs`.
 */
function stopBeforeExit(child: ChildProcess): void {
  child.kill('SIGTERM');
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (const deadline = Date.now() + exitStopMs; processAlive(child.pid!) && Date.now() < deadline; ) Atomics.wait(nap, 0, 0, 50);
  if (processAlive(child.pid!)) child.kill('SIGKILL');
}

/** How long a platform is given to stop its sandboxes and unmount after SIGTERM (a few seconds when healthy). */
const stopGraceMs = 120_000;

/**
 * SIGTERM and wait for the exit code; a platform still running after `stopGraceMs` is SIGKILLed
 * and the stop throws with its output and its processes as they were, so a hung shutdown fails its
 * test (saying where it hung) instead of its whole file.
 */
async function stopChild(child: ChildProcess, dataDir: string, output: () => string): Promise<number | null> {
  let processes = '';
  const { code, killed } = await signalAndWait(child, 'SIGTERM', stopGraceMs, () => (processes = processesOf(child.pid!, dataDir)));
  if (killed)
    throw new Error(
      `platform did not stop within ${stopGraceMs / 1000} s of SIGTERM (SIGKILLed); its processes then:\n${processes}\nits output:\n${output().slice(-5000)}`,
    );
  return code;
}
