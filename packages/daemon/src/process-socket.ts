import type { WebSocket } from 'ws';
import { ClientStreamMessageSchema, type ServerStreamMessage } from '@space/protocol';
import { closeWithError } from '@space/server-kit';
import type { ManagedProcess, ProcessEvent, ReplayOptions } from './managed-process.js';

/** Above this much unsent data on the socket, the process's pipes are paused. */
const highWaterBytes = 4 * 1024 * 1024;

export function sendMessage(ws: WebSocket, message: ServerStreamMessage, onSent?: () => void): void {
  if (ws.readyState !== ws.OPEN) return;
  ws.send(JSON.stringify(message), onSent);
}

/**
 * Connects a WebSocket to a managed process: output and exit go out, stdin, signals and resizes come
 * in. Closing the socket leaves the process running, so a client can re-attach by pid.
 */
export function bindProcessSocket(ws: WebSocket, proc: ManagedProcess, replay: ReplayOptions = { replay: false }): void {
  sendMessage(ws, { type: 'started', pid: proc.pid });
  const unsubscribe = proc.subscribe((event: ProcessEvent) => {
    if (event.type === 'exit') {
      sendMessage(ws, { type: 'exit', exitCode: event.exitCode, signal: event.signal, timedOut: event.timedOut }, () => ws.close(1000, 'exit'));
      return;
    }
    sendMessage(ws, { type: event.type, data: event.data.toString('base64'), offset: event.offset }, () => {
      if (ws.bufferedAmount < highWaterBytes) proc.resumePipes();
    });
    if (ws.bufferedAmount >= highWaterBytes) proc.pausePipes();
  }, replay);

  ws.on('message', (raw, isBinary) => {
    if (isBinary) return sendMessageError(ws, 'binary frames are not accepted');
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString());
    } catch {
      return sendMessageError(ws, 'messages must be JSON');
    }
    const message = ClientStreamMessageSchema.safeParse(parsed);
    if (!message.success) return sendMessageError(ws, `invalid message: ${message.error.issues[0]?.message ?? 'unknown'}`);
    const m = message.data;
    if (m.type === 'stdin') proc.write(Buffer.from(m.data, 'base64'));
    else if (m.type === 'stdin-eof') proc.endStdin();
    else if (m.type === 'signal') proc.kill(m.signal);
    else if (m.type === 'resize') proc.resize(m.cols, m.rows);
  });
  ws.on('close', () => {
    unsubscribe();
    proc.resumePipes();
  });
}

function sendMessageError(ws: WebSocket, message: string): void {
  sendMessage(ws, { type: 'error', code: 'VALIDATION_FAILED', message });
}

/**
 * Calls `handler` with the first message of a socket, synchronously inside the message event, so
 * the handler can attach its own listeners before any later message (sent in the same breath, like
 * stdin right after start) is emitted. No first message within `timeoutMs` closes the socket.
 */
export function onFirstMessage(ws: WebSocket, timeoutMs: number, handler: (message: unknown) => void): void {
  const timer = setTimeout(() => closeWithError(ws, 'VALIDATION_FAILED', 'no start message received in time'), timeoutMs);
  ws.once('message', (raw) => {
    clearTimeout(timer);
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString());
    } catch {
      return closeWithError(ws, 'VALIDATION_FAILED', 'the start message must be JSON');
    }
    handler(parsed);
  });
  ws.once('close', () => clearTimeout(timer));
}
