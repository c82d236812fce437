import { WebSocket } from 'ws';
import { processRssMb } from '../host-state.js';

/** Settings of a platform whose retained memory a test measures: its inspector on a free loopback port (it prints the address). */
export const inspectablePlatformEnv = { NODE_OPTIONS: '--inspect=127.0.0.1:0' };

/**
 * What a platform process holds after a full garbage collection, asked through its inspector (the
 * address is in its `output`): RSS and V8's used heap, MB. Without the collection RSS counts garbage
 * not yet collected: after 1,000 fuzz requests Node 24's platform had 240-290 MB before one and
 * 140 MB after it, its used heap 31 MB before the run and 34 MB after.
 */
export async function retainedMemory(output: string, pid: number): Promise<{ rssMb: number; heapMb: number }> {
  const address = /Debugger listening on (ws:\/\/\S+)/.exec(output)?.[1];
  if (!address) throw new Error('the platform has no inspector: start it with inspectablePlatformEnv');
  const ws = new WebSocket(address);
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
  let nextId = 0;
  const call = (method: string, params: object = {}): Promise<{ result?: { value?: unknown } }> =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      const timer = setTimeout(() => reject(new Error(`the inspector did not answer ${method} within 30 s`)), 30_000);
      const onMessage = (data: Buffer): void => {
        const message = JSON.parse(data.toString()) as { id?: number; result?: { result?: { value?: unknown } } };
        if (message.id !== id) return;
        clearTimeout(timer);
        ws.off('message', onMessage);
        resolve(message.result ?? {});
      };
      ws.on('message', onMessage);
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const reply = await call('Runtime.evaluate', { expression: 'process.memoryUsage().heapUsed' });
    return { rssMb: processRssMb(pid), heapMb: Number(reply.result?.value ?? Number.NaN) / 2 ** 20 };
  } finally {
    ws.close();
  }
}
