import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Limits } from '@space/protocol';
import type { ExecStream, ProcessData } from '@space/sdk';
import { toConnectError } from '../errors.js';
import { type ProcessEventSchema, type ProcessSelector, type Process, Signal } from '../gen/process_pb.js';
import { keepaliveMs, withKeepalives } from './keepalive.js';
import type { SpaceFor } from './sandbox-access.js';
import { asConnectErrors, rpcSandbox } from './rpc-sandbox.js';

/** What Start and Connect stream: one process event per message. */
type ProcessEventMessage = { event: MessageInitShape<typeof ProcessEventSchema> };

const signalNames = new Map<Signal, string>([
  [Signal.SIGKILL, 'SIGKILL'],
  [Signal.SIGTERM, 'SIGTERM'],
]);

function pidOf(selector: ProcessSelector | undefined): number {
  if (selector?.selector.case === 'pid') return selector.selector.value;
  if (selector?.selector.case === 'tag') throw new ConnectError('SPACE has no process tags: select the process by pid', Code.InvalidArgument);
  throw new ConnectError('select the process by pid', Code.InvalidArgument);
}

/** A command as envd lists it: a program and its arguments (a shell string runs under `/bin/sh -c`). */
function processConfig(p: ProcessData): { cmd: string; args: string[]; envs: Record<string, string> } {
  const argv = typeof p.cmd === 'string' ? ['/bin/sh', '-c', p.cmd] : p.cmd;
  return { cmd: argv[0]!, args: argv.slice(1), envs: {} };
}

/**
 * A SPACE process stream as envd's process events: start (pid), data (stdout, stderr, or the
 * terminal's output), end (exit code and status), with keepalives while it is quiet. Closing it
 * (the client left) leaves the process running, as envd does.
 */
async function* processEvents(stream: ExecStream, ctx: HandlerContext, opts: { pid: number | null; pty: boolean }): AsyncGenerator<ProcessEventMessage> {
  let startSent = opts.pid !== null;
  if (opts.pid !== null) yield { event: { event: { case: 'start', value: { pid: opts.pid } } } };
  try {
    for await (const event of withKeepalives(stream, keepaliveMs(ctx.requestHeader), () => 'keepalive' as const, ctx.signal)) {
      if (event === 'keepalive') yield { event: { event: { case: 'keepalive', value: {} } } };
      else if (event.type === 'started') {
        if (!startSent) yield { event: { event: { case: 'start', value: { pid: event.pid } } } };
        startSent = true;
      } else if (event.type === 'exit') {
        const status = event.signal ? `signal: ${event.signal}` : `exit status ${event.exitCode}`;
        yield { event: { event: { case: 'end', value: { exitCode: event.exitCode, exited: event.signal === null, status } } } };
        return;
      } else if (event.type !== 'restored') {
        // (`restored` comes only on a re-attaching stream; these are relayed without re-attaching.)
        const output = opts.pty ? 'pty' : event.type;
        yield { event: { event: { case: 'data', value: { output: { case: output, value: event.data } } } } };
      }
    }
  } catch (err) {
    throw toConnectError(err);
  } finally {
    stream.close();
  }
}

/** envd's `process.Process` over SPACE's processes: each call acts on the session the request names. */
export function processService(spaceFor: SpaceFor): ServiceImpl<typeof Process> {
  return {
    async list(_req, ctx) {
      const processes = await asConnectErrors(() => rpcSandbox(ctx, spaceFor).processes());
      return { processes: processes.filter((p) => p.running).map((p) => ({ pid: p.pid, config: processConfig(p) })) };
    },

    async *start(req, ctx) {
      const sandbox = rpcSandbox(ctx, spaceFor);
      const config = req.process;
      if (!config?.cmd) throw new ConnectError('process.cmd is required', Code.InvalidArgument);
      const argv = [config.cmd, ...config.args];
      const options = { env: config.envs, ...(config.cwd ? { cwd: config.cwd } : {}) };
      // Relayed without re-attaching: a pause or a kill ends the stream, as it ends envd's.
      if (req.pty) {
        const size = req.pty.size;
        const terminal = sandbox.pty({ cmd: argv, cols: size?.cols || 80, rows: size?.rows || 24, ...options, reattach: false });
        yield* processEvents(terminal, ctx, { pid: null, pty: true });
        return;
      }
      // The longest exec timeout: a command of E2B's runs until it ends or is killed, as under envd.
      const stream = sandbox.execStream(argv, { ...options, commandTimeoutMs: Limits.maxExecTimeoutMs, reattach: false });
      if (req.stdin !== true) stream.end(); // envd gives a command no stdin unless asked
      yield* processEvents(stream, ctx, { pid: null, pty: false });
    },

    async *connect(req, ctx) {
      const sandbox = rpcSandbox(ctx, spaceFor);
      const pid = pidOf(req.process);
      const found = (await asConnectErrors(() => sandbox.processes())).find((p) => p.pid === pid && p.running);
      if (!found) throw new ConnectError(`PROCESS_NOT_FOUND: no running process ${pid}`, Code.NotFound);
      yield* processEvents(sandbox.attach(pid, { reattach: false }), ctx, { pid, pty: found.pty });
    },

    async update(req, ctx) {
      const size = req.pty?.size;
      if (size) await asConnectErrors(() => rpcSandbox(ctx, spaceFor).sendToProcess(pidOf(req.process), { resize: { cols: size.cols, rows: size.rows } }));
      return {};
    },

    async streamInput(requests, ctx) {
      const sandbox = rpcSandbox(ctx, spaceFor);
      let pid: number | null = null;
      for await (const request of requests) {
        if (request.event.case === 'start') pid = pidOf(request.event.value.process);
        else if (request.event.case === 'data') {
          if (pid === null) throw new ConnectError('the first message names the process (start)', Code.InvalidArgument);
          const input = request.event.value.input?.input;
          const target = pid;
          if (input?.value) await asConnectErrors(() => sandbox.sendToProcess(target, { stdin: input.value }));
        }
      }
      return {};
    },

    async sendInput(req, ctx) {
      const input = req.input?.input;
      if (input?.value) await asConnectErrors(() => rpcSandbox(ctx, spaceFor).sendToProcess(pidOf(req.process), { stdin: input.value }));
      return {};
    },

    async sendSignal(req, ctx) {
      const name = signalNames.get(req.signal);
      if (!name) throw new ConnectError('signal is SIGKILL or SIGTERM', Code.InvalidArgument);
      await asConnectErrors(() => rpcSandbox(ctx, spaceFor).signal(pidOf(req.process), name));
      return {};
    },

    async closeStdin(req, ctx) {
      await asConnectErrors(() => rpcSandbox(ctx, spaceFor).sendToProcess(pidOf(req.process), { eof: true }));
      return {};
    },
  };
}
