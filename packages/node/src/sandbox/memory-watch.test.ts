import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Upstream } from '@space/server-kit';
import { InboundConnections } from './inbound-connections.js';
import { SandboxEntries } from './sandbox-entries.js';
import { LiveSandboxes, type LiveSandbox } from './live-sandboxes.js';
import { MemoryWatch, readAgainAfterMs } from './memory-watch.js';

test('memory watch: only a sandbox near its memory gets the guard called, one call at a time, none while it is paused', async () => {
  const live = new LiveSandboxes('node-1');
  const sandbox = (id: string, memoryMb: number, pendingCall: Promise<unknown> | null = null): LiveSandbox =>
    ({
      record: { sandboxId: id, sessionId: `ses_${id}`, template: 'tiny', startedAt: '', token: '', leaseIndex: 0, sandboxIp: '', memoryMb },
      daemon: { id } as unknown as Upstream,
      inbound: new InboundConnections(),
      pid: null,
      pendingCall,
      callsInFlight: 0,
      entries: new SandboxEntries(),
    }) as LiveSandbox;
  live.add(sandbox('sbx_calm', 512));
  live.add(sandbox('sbx_full', 512));
  live.add(sandbox('sbx_paused', 512, new Promise(() => undefined)));
  live.add(sandbox('sbx_close', 512));
  live.add(sandbox('sbx_idle', 4096));
  const used: Record<string, number> = {
    sbx_calm: 200 * 2 ** 20,
    sbx_full: 500 * 2 ** 20,
    sbx_paused: 600 * 2 ** 20,
    sbx_close: 450 * 2 ** 20,
    sbx_idle: 20 * 2 ** 20,
  };
  const reads: Record<string, number> = {};
  const asked: string[] = [];
  const warnings: string[] = [];
  let release = (): void => undefined;
  const watch = new MemoryWatch({
    live,
    memory: {
      workingSet: (id) => {
        reads[id] = (reads[id] ?? 0) + 1;
        return used[id] ?? null;
      },
      retain: () => undefined,
      closeAll: () => undefined,
    },
    link: {
      relieveMemory: (daemon) => {
        asked.push((daemon as unknown as { id: string }).id);
        return new Promise((resolve) => {
          release = () => resolve({ killed: { pid: 42, name: 'python3', rssMiB: 480 }, availableMiB: 5, totalMiB: 512 });
        });
      },
    },
    log: { info: () => undefined, warn: (m) => warnings.push(m), error: () => undefined },
  });
  watch.start();
  await new Promise((r) => setTimeout(r, 350));
  assert.deepEqual(asked, ['sbx_full'], 'one call in flight for the full sandbox, none for the calm or the paused one');
  release();
  await new Promise((r) => setTimeout(r, 250));
  watch.stop();
  assert.ok(asked.length >= 2 && asked.every((id) => id === 'sbx_full'), `asked again once answered: ${asked}`);
  assert.match(warnings[0]!, /sbx_full .* ran out of its 512 MB: killed pid 42 \(python3, 480 MiB\)/);
  assert.ok(reads.sbx_idle! <= 2, `a sandbox far from its limit is read every ~500 ms: ${reads.sbx_idle} reads in 600 ms`);
  assert.ok(reads.sbx_close! >= 4, `one just under it every 100 ms: ${reads.sbx_close}`);
  assert.equal(reads.sbx_paused, undefined, 'a paused one not at all');
});

test('memory watch: a sandbox is read again before growth it would stop at its limit could bring it as close to the backstop, from every 100 ms', () => {
  const mb = 2 ** 20;
  // 1,024 MB: near 922 MB, backstop 1,536 MB; growth caught reading every 100 ms: 614 MB / 200 ms.
  const [near, backstop] = [1024 * 0.9 * mb, 1536 * mb];
  assert.equal(readAgainAfterMs(near, near, backstop), 100, 'at its limit: the shortest interval, as before');
  assert.equal(readAgainAfterMs(near + 500 * mb, near, backstop), 100, 'past it too');
  assert.equal(Math.round(readAgainAfterMs(30 * mb, near, backstop)), 390, 'an idle one: almost four times less often');
  assert.equal(Math.round(readAgainAfterMs(0, 8192 * 0.9 * mb, 10_496 * mb)), 572, 'a big idle one: almost six times less');
});
