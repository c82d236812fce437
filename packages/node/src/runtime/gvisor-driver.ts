import { openSync, closeSync, existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';
import type { RuntimeDriver, SandboxSpec, SandboxStats } from './driver.js';
import { buildOciSpec } from './oci-spec.js';

/**
 * gVisor (runsc, ptrace platform). This runsc refuses networking when it believes it is in the host
 * network namespace because it looks for /proc/sys/net/core/rmem_default, which newer kernels show
 * everywhere; runsc therefore runs in its own mount namespace with a tmpfs over /proc/sys/net.
 */
export class GvisorDriver implements RuntimeDriver {
  readonly name = 'gvisor';

  constructor(
    private readonly stateRoot: string,
    private readonly runscBinary = 'runsc',
  ) {}

  private globalFlags(logFile?: string): string[] {
    const flags = [`--root=${this.stateRoot}`, '--platform=ptrace', '--network=sandbox', '--overlay2=none'];
    if (logFile) flags.push(`--log=${logFile}`);
    return flags;
  }

  async preflight(): Promise<void> {
    const found = await runCommand([this.runscBinary, '--version'], { allowFailure: true }).catch(() => null);
    if (!found || found.code !== 0) throw new Error(`${this.runscBinary} not found: install gVisor with "apt-get install runsc" (./space up does this)`);
    await mkdir(this.stateRoot, { recursive: true });
  }

  async start(spec: SandboxSpec): Promise<void> {
    const bundle = path.join(spec.workDir, 'bundle');
    await mkdir(bundle, { recursive: true });
    await writeFile(path.join(bundle, 'config.json'), JSON.stringify(buildOciSpec(spec)));
    const console = openSync(path.join(spec.workDir, 'console.log'), 'a');
    try {
      const run = [this.runscBinary, ...this.globalFlags(path.join(spec.workDir, 'runsc.log')), 'run', '--detach', `--bundle=${bundle}`, spec.sandboxId];
      await runCommand(['unshare', '-m', '--propagation', 'private', 'sh', '-c', 'mount -t tmpfs none /proc/sys/net && exec "$@"', 'sh', ...run], {
        stdio: ['ignore', console, console],
      });
    } finally {
      closeSync(console);
    }
  }

  async destroy(sandboxId: string): Promise<void> {
    if (!existsSync(path.join(this.stateRoot, sandboxId)) && !(await this.list()).includes(sandboxId)) return;
    await runCommand([this.runscBinary, ...this.globalFlags(), 'delete', '--force', sandboxId], { allowFailure: true });
  }

  async stats(sandboxId: string): Promise<SandboxStats> {
    const result = await runCommand([this.runscBinary, ...this.globalFlags(), 'state', sandboxId], { allowFailure: true });
    if (result.code !== 0) return { running: false, pid: null };
    const state = JSON.parse(result.stdout) as { status?: string; pid?: number };
    return { running: state.status === 'running', pid: state.pid ?? null };
  }

  async list(): Promise<string[]> {
    const result = await runCommand([this.runscBinary, ...this.globalFlags(), 'list', '--quiet'], { allowFailure: true });
    return result.stdout.split('\n').map((s) => s.trim()).filter(Boolean);
  }
}
