import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EventStream } from '@space/protocol';

export interface EventRelayBounds {
  /** A line longer than this is dropped (with a notice in its place). */
  maxEventBytes: number;
  /** Past this many bytes relayed, only the events that always pass (an error, the end) do. */
  maxTotalBytes: number;
  /** Who sends the stream, for notices: `node n1`, `the sandbox's code interpreter`. */
  label: string;
}

/**
 * Relays a stream of JSON lines from `up` (the layer below) to `res`, each line parsed and checked
 * against the stream's event schema and bounded in size, so what comes from inside a sandbox reaches the caller in
 * the protocol's shape or not at all. Backpressure holds: a slow caller pauses the upstream. A
 * caller that goes away ends the upstream request, which the sandbox sees as its caller leaving.
 * Resolves with the final event, or null when the stream ended (or was cut) without one.
 */
export function relayEvents(up: IncomingMessage, res: ServerResponse, stream: EventStream, bounds: EventRelayBounds): Promise<unknown> {
  res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store' });
  // At once: the caller learns the cell runs even while it prints nothing.
  res.flushHeaders();
  let relayed = 0;
  let spent = false;
  let final: unknown = null;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let dropping = false;

  const send = (event: unknown): void => {
    if (res.writableEnded || res.destroyed) return;
    if (!res.write(`${JSON.stringify(event)}\n`)) {
      up.pause();
      res.once('drain', () => up.resume());
    }
  };
  // A sandbox that sends nothing but bad lines gets a few notices, not one per line.
  let notices = 0;
  const say = (message: string, broken = false): void => {
    if (broken || notices++ < 10) send(stream.notice(message, broken));
  };
  const finish = (): void => {
    if (!res.writableEnded) res.end();
    up.destroy();
  };
  const oversized = (): void => say(`${bounds.label} sent an event of more than ${bounds.maxEventBytes} bytes; dropped`);
  const line = (raw: Buffer): void => {
    if (final !== null || raw.length === 0) return;
    if (raw.length > bounds.maxEventBytes) return oversized();
    let event: unknown;
    try {
      event = JSON.parse(raw.toString('utf8'));
    } catch {
      return say(`${bounds.label} sent a line that is not JSON; dropped`);
    }
    const checked = stream.event.safeParse(event);
    if (!checked.success) return say(`${bounds.label} sent an event outside the protocol; dropped`);
    if (spent && !stream.alwaysPasses(checked.data)) return;
    relayed += raw.length;
    if (!spent && relayed > bounds.maxTotalBytes && !stream.alwaysPasses(checked.data)) {
      spent = true;
      return say(`more than ${bounds.maxTotalBytes} bytes of output; the rest is not sent`);
    }
    send(checked.data);
    if (stream.isFinal(checked.data)) {
      final = checked.data;
      finish();
    }
  };

  up.on('data', (chunk: Buffer) => {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (dropping) {
        dropping = false;
        continue;
      }
      line(pendingBytes ? Buffer.concat([...pending, piece]) : piece);
      pending = [];
      pendingBytes = 0;
    }
    if (start < chunk.length && !dropping) {
      pending.push(chunk.subarray(start));
      pendingBytes += chunk.length - start;
      if (pendingBytes > bounds.maxEventBytes) {
        oversized();
        pending = [];
        pendingBytes = 0;
        dropping = true;
      }
    }
  });
  return new Promise((resolve) => {
    const brokenOff = (why: string): void => {
      if (final === null) say(`${bounds.label} ${why} before the end of the stream`, true);
      finish();
    };
    up.once('end', () => brokenOff('ended its reply'));
    up.once('error', (err) => brokenOff(`broke off (${err.message})`));
    up.once('close', () => (final === null && !res.writableEnded ? brokenOff('closed its connection') : undefined));
    // The caller left: the upstream request ends too, and the sandbox sees its caller gone.
    res.once('close', () => {
      up.destroy();
      resolve(final);
    });
  });
}
