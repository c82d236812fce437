import type { ProcessList, Service } from '@space/protocol';
import type { Logger } from '../logger.js';
import { callDaemon } from './daemon-calls.js';
import type { LiveSandbox } from './live-sandboxes.js';
import type { DaemonLink } from './daemon-link.js';

/**
 * The supervisor a service runs under, inside the sandbox: a shell loop that starts it again when
 * it exits, after a pause doubling from 1 s to 30 s (back to 1 s after a run of a minute or more),
 * saying so on stderr. Its `$0` names the service, so the process list shows which it is.
 */
const supervisor =
  'd=1; while :; do s=$(date +%s); "$@"; code=$?; [ $(( $(date +%s) - s )) -ge 60 ] && d=1; ' +
  'echo "space: service $0 exited with $code; starting it again in $d seconds" >&2; sleep $d; d=$(( d * 2 > 30 ? 30 : d * 2 )); done';

export function serviceCommand(service: Service): string[] {
  const argv = typeof service.cmd === 'string' ? ['/bin/sh', '-c', service.cmd] : service.cmd;
  return ['/bin/sh', '-c', supervisor, `space-service:${service.name}`, ...argv];
}

/**
 * Starts the session's services in a sandbox that did not restore its processes (a fresh boot, a
 * pooled sandbox, a template's image), each as a background process. One that cannot be started
 * (its `cwd` is missing) is reported, and the others start all the same.
 */
export async function startServices(link: DaemonLink, live: LiveSandbox, services: Service[], log: Logger): Promise<string[]> {
  const failed: string[] = [];
  for (const service of services) {
    try {
      await link.startBackground(live.daemon, { cmd: serviceCommand(service), env: service.env, cwd: service.cwd });
    } catch (err) {
      log.warn(`service ${service.name} of ${live.record.sessionId} did not start: ${(err as Error).message}`);
      failed.push(`${service.name}: ${(err as Error).message.slice(0, 200)}`);
    }
  }
  return failed;
}

/**
 * The processes the sandbox's daemon lists (with the count of those it did not start); cut if the
 * sandbox dies meanwhile: a killed sandbox answers nothing, and resets nothing, on a connection the
 * node had open to it.
 */
export function listProcesses(link: DaemonLink, live: LiveSandbox): Promise<ProcessList> {
  return callDaemon(live, () => link.processes(live.daemon));
}

/** How long a stopped service has to end after SIGTERM before it gets SIGKILL. */
const stopGraceMs = 5000;

/**
 * Stops a service's supervisor and what it runs (one process group), and returns once it ended (so
 * its port is closed when the caller answers); SIGKILL after a grace period. False when it does not run.
 */
export async function stopService(link: DaemonLink, live: LiveSandbox, name: string): Promise<boolean> {
  const running = async (pid?: number) =>
    (await listProcesses(link, live)).processes.find(
      (p) => p.running && (pid === undefined ? Array.isArray(p.cmd) && p.cmd[3] === `space-service:${name}` : p.pid === pid),
    );
  const found = await running();
  if (!found) return false;
  for (const [signal, waitMs] of [
    ['SIGTERM', stopGraceMs],
    ['SIGKILL', 1000],
  ] as const) {
    // It may have ended on its own meanwhile: the signal then finds no process.
    await callDaemon(live, () => link.signal(live.daemon, found.pid, signal)).catch(() => undefined);
    const deadline = Date.now() + waitMs;
    while (Date.now() < deadline) {
      if (!(await running(found.pid))) return true;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return true;
}
