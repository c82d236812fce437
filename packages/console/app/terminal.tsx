import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { socket } from './api.js';

const encoder = new TextEncoder();
const toBase64 = (text: string) => btoa(String.fromCharCode(...encoder.encode(text)));
const fromBase64 = (data: string) => Uint8Array.from(atob(data), (c) => c.charCodeAt(0));

/**
 * A live terminal in the session's sandbox: the PTY stream over a WebSocket, resized with its box;
 * or, given `attach`, a running process's output (replayed from what it kept) and its stdin.
 * A dropped connection re-attaches to the same process, replaying only what was missed (offsets).
 */
export function SessionTerminal({ sessionId, attach }: { sessionId: string; attach?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const [state, setState] = useState('connecting');
  useEffect(() => {
    const term = new Terminal({ convertEol: false, fontSize: 13, cursorBlink: true });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box.current!);
    fit.fit();
    let ws: WebSocket | null = null;
    let pid: number | null = attach ?? null;
    let seen = 0;
    let closed = false;
    // A dropped stream is tried again, a little later each time (up to 10 s), sooner once it is back.
    let retryMs = 1000;
    const connect = () => {
      ws = pid === null ? socket(`/v1/sessions/${sessionId}/pty`) : socket(`/v1/sessions/${sessionId}/processes/${pid}/attach?after=${seen}`);
      ws.onopen = () => {
        setState('connected');
        retryMs = 1000;
        if (pid === null) ws!.send(JSON.stringify({ type: 'start', cols: term.cols, rows: term.rows }));
      };
      ws.onmessage = (event) => {
        const m = JSON.parse(String(event.data)) as { type: string; pid?: number; data?: string; offset?: number; exitCode?: number; message?: string };
        if (m.type === 'started') pid = m.pid!;
        else if ((m.type === 'stdout' || m.type === 'stderr') && m.data) {
          const bytes = fromBase64(m.data);
          // A re-attach may replay a little of what was shown: only the rest is written.
          const skip = m.offset !== undefined ? Math.max(0, seen - m.offset) : 0;
          if (skip < bytes.length) term.write(bytes.subarray(skip));
          seen = m.offset !== undefined ? Math.max(seen, m.offset + bytes.length) : seen + bytes.length;
        } else if (m.type === 'exit') {
          term.write(`\r\n[the shell exited with ${m.exitCode}]\r\n`);
          closed = true;
          setState('exited');
        } else if (m.type === 'error') term.write(`\r\n[${m.message}]\r\n`);
      };
      ws.onclose = () => {
        if (closed) return;
        setState('reconnecting');
        setTimeout(connect, retryMs);
        retryMs = Math.min(10_000, retryMs * 2);
      };
    };
    connect();
    const input = term.onData((data) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'stdin', data: toBase64(data) })));
    const resized = term.onResize(({ cols, rows }) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'resize', cols, rows })));
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(box.current!);
    term.focus();
    return () => {
      closed = true;
      observer.disconnect();
      input.dispose();
      resized.dispose();
      ws?.close();
      term.dispose();
    };
  }, [sessionId, attach]);
  return (
    <section aria-label="Terminal">
      <p>
        Terminal: <span data-terminal-state={state}>{state}</span>
      </p>
      <div class="terminal-box" ref={box} />
    </section>
  );
}
