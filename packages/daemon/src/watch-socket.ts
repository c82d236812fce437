import { watch } from 'node:fs';
import type { WebSocket } from 'ws';
import type { WatchEvent } from '@space/protocol';
import { fsError } from './fs-errors.js';
import { closeWithError } from '@space/server-kit';

/** Most change events forwarded per second; the rest are dropped with a note, so a busy tree cannot flood. */
const maxEventsPerSecond = 200;

/** Streams filesystem change events under a path until the socket closes. */
export function bindWatchSocket(ws: WebSocket, abs: string, requested: string): void {
  let watcher: ReturnType<typeof watch>;
  try {
    watcher = watch(abs, { recursive: true });
  } catch (err) {
    const e = fsError(err, requested);
    return closeWithError(ws, e.code, e.message);
  }
  let windowStart = Date.now();
  let sent = 0;
  watcher.on('change', (event, filename) => {
    const now = Date.now();
    if (now - windowStart >= 1000) {
      windowStart = now;
      sent = 0;
    }
    if (++sent > maxEventsPerSecond || ws.readyState !== ws.OPEN) return;
    const message: WatchEvent = {
      type: 'change',
      event: event === 'rename' ? 'rename' : 'change',
      path: `${abs.replace(/\/$/, '')}/${String(filename ?? '')}`,
    };
    ws.send(JSON.stringify(message));
  });
  watcher.on('error', (err) => {
    const e = fsError(err, requested);
    closeWithError(ws, e.code, e.message);
  });
  ws.send(JSON.stringify({ type: 'ready', path: abs }));
  ws.on('close', () => watcher.close());
}
