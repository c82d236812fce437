import assert from 'node:assert/strict';
import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { codeEventStream } from '@space/protocol';
import { relayEvents } from './event-relay.js';

const bounds = { maxEventBytes: 1024, maxTotalBytes: 4096, label: 'the sandbox' };
const end = { type: 'end', contextId: 'python', executionCount: 1, durationMs: 5 };
const line = (event: unknown): string => `${JSON.stringify(event)}\n`;

/**
 * A real hostile upstream (it writes `send`'s chunks as they are) behind a real relay, read by a
 * real client: what the client gets, and what the relay resolved with.
 */
/** What a client reads: events of the code protocol, loosely typed. */
type Event = { type: string; text: string; name?: string };

async function relay(send: (res: ServerResponse) => void): Promise<{ events: Event[]; final: unknown }> {
  const upstream = createServer((_req, res) => send(res));
  let final: Promise<unknown> = Promise.resolve(null);
  const front = createServer((_req, res) => {
    get(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`, (up: IncomingMessage) => {
      final = relayEvents(up, res, codeEventStream, bounds);
    });
  });
  await Promise.all([new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r)), new Promise<void>((r) => front.listen(0, '127.0.0.1', r))]);
  try {
    const text = await (await fetch(`http://127.0.0.1:${(front.address() as AddressInfo).port}/`)).text();
    return {
      events: text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
      final: await final,
    };
  } finally {
    upstream.closeAllConnections();
    front.closeAllConnections();
    upstream.close();
    front.close();
  }
}

describe('relayEvents: a hostile event stream reaches the caller in the protocol shape, bounded', () => {
  test('events pass in order, split anywhere across chunks; the end is last and returned', async () => {
    const body = line({ type: 'stdout', text: 'hi\n' }) + line({ type: 'result', isMainResult: true, data: { 'text/plain': '42' } }) + line(end);
    const { events, final } = await relay((res) => {
      res.writeHead(200);
      for (let i = 0; i < body.length; i += 7) res.write(body.slice(i, i + 7));
      res.write(line({ type: 'stdout', text: 'after the end' }));
      res.end();
    });
    assert.deepEqual(
      events.map((e) => e.type),
      ['stdout', 'result', 'end'],
    );
    assert.deepEqual(final, end);
  });

  test('lines that are not JSON or not events are dropped with a few notices; an oversized one is dropped whole', async () => {
    const { events } = await relay((res) => {
      res.writeHead(200);
      for (let i = 0; i < 50; i++) res.write('not json\n');
      res.write(line({ type: 'stdout', text: 7 }));
      res.write(line({ type: 'stdout', text: 'x'.repeat(5000) }));
      res.write(line({ type: 'stdout', text: 'still here' }));
      res.end(line(end));
    });
    const notices = events.filter((e) => e.type === 'stderr' && e.text.includes('[space:'));
    assert.equal(notices.length, 10, 'at most 10 notices, however many bad lines');
    assert.ok(!events.some((e) => e.type === 'stdout' && e.text.length > 1024));
    assert.deepEqual(
      events.filter((e) => e.type === 'stdout').map((e) => e.text),
      ['still here'],
    );
    assert.equal(events.at(-1)?.type, 'end');
  });

  test('past the total, only one notice, the error and the end pass', async () => {
    const { events } = await relay((res) => {
      res.writeHead(200);
      for (let i = 0; i < 20; i++) res.write(line({ type: 'stdout', text: 'y'.repeat(500) }));
      res.write(line({ type: 'error', name: 'ValueError', value: 'v', traceback: [] }));
      res.end(line(end));
    });
    const relayed = events.filter((e) => e.type === 'stdout').reduce((n, e) => n + e.text.length, 0);
    assert.ok(relayed <= 4096, `${relayed} bytes relayed`);
    assert.equal(events.filter((e) => e.type === 'stderr' && /the rest is not sent/.test(e.text)).length, 1);
    assert.deepEqual(
      events.slice(-2).map((e) => e.type),
      ['error', 'end'],
    );
  });

  test('a stream that breaks off before its end says so as an error, and resolves without a final event', async () => {
    const { events, final } = await relay((res) => {
      res.writeHead(200);
      res.write(line({ type: 'stdout', text: 'partial' }));
      setTimeout(() => res.socket?.destroy(), 50);
    });
    assert.equal(final, null);
    assert.equal(events.at(-1)?.type, 'error');
    assert.equal(events.at(-1)?.name, 'OutputError');
  });
});
