import type { Api } from './client.js';

/**
 * Runs a busy loop for `seconds` in the session's sandbox (after `before`, a shell command whose
 * CPU counts too) and returns the CPU time the sandbox itself counted for them: dash's `times`,
 * its children's user and system time.
 */
export async function cpuLoad(api: Api, sessionId: string, seconds: number, before = 'true'): Promise<number> {
  const reply = await api.exec(sessionId, ['sh', '-c', `${before}; timeout ${seconds} sh -c 'while :; do :; done'; times`], { timeoutMs: 120_000 });
  const children = reply.stdout.trim().split('\n').at(-1) ?? '';
  const match = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(children);
  if (!match) throw new Error(`no times in ${JSON.stringify(reply.stdout)}`);
  const [userMin, userSec, sysMin, sysSec] = match.slice(1).map(Number) as [number, number, number, number];
  return userMin * 60 + userSec + sysMin * 60 + sysSec;
}
