import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Upstream } from '@space/server-kit';
import { InboundConnections } from './inbound-connections.js';
import { LiveSandboxes, type LiveSandbox } from './live-sandboxes.js';
import { MemoryWatch } from './memory-watch.js';

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
    }) as LiveSandbox;
  live.add(sandbox('sbx_calm', 512));
  live.add(sandbox('sbx_full', 512));
  live.add(sandbox('sbx_paused', 512, new Promise(() => undefined)));
  const used: Record<string, number> = { sbx_calm: 200 * 2 ** 20, sbx_full: 500 * 2 ** 20, sbx_paused: 600 * 2 ** 20 };
  const asked: string[] = [];
  const warnings: string[] = [];
  let release = (): void => undefined;
  const watch = new MemoryWatch({
    live,
    workingSet: (id) => used[id] ?? null,
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
});
