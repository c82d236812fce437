import path from 'node:path';
import type { SessionHandle } from '@space/sdk';
import type { BuildContext } from './build-context.js';
import type { BuildLog } from './build-log.js';
import { type DockerfileStep, substitute } from './dockerfile.js';
import { runAs } from '../templates/template-config.js';

type FileStep = Extract<DockerfileStep, { kind: 'RUN' | 'COPY' | 'ADD' | 'WORKDIR' }>;

/** What a step runs with: the Dockerfile's state when it is reached. */
export interface StepState {
  env: Record<string, string>;
  args: Record<string, string>;
  workdir: string;
  user: string;
}

const archive = /\.(tar|tar\.gz|tgz|tar\.bz2|tar\.xz)$/;

/** Runs a build's steps that change files in its sandbox, through the public API with the build session's token; output goes to the build's log. */
export class BuildStepRunner {
  constructor(
    private readonly session: SessionHandle,
    private readonly context: BuildContext,
    private readonly log: BuildLog,
  ) {}

  async run(step: FileStep, state: StepState, deadline: number): Promise<void> {
    const vars = { ...state.args, ...state.env };
    switch (step.kind) {
      case 'WORKDIR':
        return this.sh(['mkdir', '-p', state.workdir], deadline);
      case 'RUN':
        // ARGs are in the environment of RUN steps only, as in Docker.
        return this.stream(runAs(state.user, step.command), { env: vars, cwd: state.workdir }, deadline);
      default:
        return this.copy(step, state.workdir, vars, deadline);
    }
  }

  private async copy(step: Extract<FileStep, { kind: 'COPY' | 'ADD' }>, workdir: string, vars: Record<string, string>, deadline: number): Promise<void> {
    const copies = this.context.copies(step, workdir, vars);
    await this.sh(['mkdir', '-p', ...new Set(copies.map((c) => path.posix.dirname(c.target)))], deadline);
    for (const copy of copies) await this.session.files.write(copy.target, copy.data);
    const executables = copies.filter((c) => c.executable).map((c) => c.target);
    if (executables.length > 0) await this.sh(['chmod', '755', ...executables], deadline);
    this.log.line(`  ${copies.length} file(s) copied`);
    // ADD unpacks local archives where they land, as Docker does.
    if (step.kind === 'ADD')
      for (const copy of copies.filter((c) => archive.test(c.source))) {
        await this.sh(['tar', '-xf', copy.target, '-C', path.posix.dirname(copy.target)], deadline);
        await this.sh(['rm', '-f', copy.target], deadline);
      }
    if (step.chown) await this.sh(['chown', '-R', substitute(step.chown, vars), ...copies.map((c) => c.target)], deadline);
  }

  /** A helper command as root; a failure fails the step with its output. */
  private async sh(cmd: string[], deadline: number): Promise<void> {
    const result = await this.session.exec(cmd, { commandTimeoutMs: remaining(deadline) });
    if (result.exitCode !== 0) throw new Error(`${cmd[0]} exited with ${result.exitCode}: ${(result.stderr || result.stdout).slice(-500)}`);
  }

  /** A RUN: its output streamed into the log as it comes; anything but exit code 0 fails the step. */
  private async stream(cmd: string[] | string, opts: { env: Record<string, string>; cwd: string }, deadline: number): Promise<void> {
    const stream = this.session.execStream(cmd, { ...opts, commandTimeoutMs: remaining(deadline) });
    let tail = '';
    for await (const event of stream) {
      if (event.type === 'stdout' || event.type === 'stderr') {
        const text = event.data.toString('utf8');
        this.log.append(text);
        tail = (tail + text).slice(-500);
      } else if (event.type === 'exit') {
        if (event.timedOut) throw new Error('the build ran out of time (timeoutSec) in this step');
        if (event.exitCode !== 0)
          throw new Error(`the command exited with ${event.exitCode}${event.signal ? ` (${event.signal})` : ''}: ${tail.trim().split('\n').at(-1) ?? ''}`);
        return;
      }
    }
    throw new Error('the command ended without an exit status');
  }
}

function remaining(deadline: number): number {
  return Math.max(1000, deadline - Date.now());
}
