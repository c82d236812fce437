import { useEffect, useState } from 'preact/hooks';
import { call, json, readRecords } from './api.js';
import { EmptyState, ErrorAlert } from './ui.js';

type CodeEvent =
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; isMainResult: boolean; data: Record<string, unknown> }
  | { type: 'error'; name: string; value: string; traceback: string[] }
  | { type: 'end'; contextId: string; executionCount: number; durationMs: number };

interface Cell {
  code: string;
  startedAt: string;
  executionCount: number | null;
  events: CodeEvent[];
}

interface Context {
  id: string;
  language: string;
  executionCount: number;
  state: string;
}

/** One result: an image as an image, HTML in an iframe that may run nothing (no scripts, no forms, its own origin), else its text. */
function Result({ data }: { data: Record<string, unknown> }) {
  for (const mime of ['image/png', 'image/jpeg'] as const) {
    if (typeof data[mime] === 'string') return <img class="cell-image" alt="what the cell displayed" src={`data:${mime};base64,${data[mime]}`} />;
  }
  if (typeof data['image/svg+xml'] === 'string')
    return (
      <img
        class="cell-image"
        alt="what the cell displayed"
        src={`data:image/svg+xml;base64,${btoa(unescape(encodeURIComponent(data['image/svg+xml'] as string)))}`}
      />
    );
  if (typeof data['text/html'] === 'string') return <iframe class="cell-html" title="an HTML result" sandbox="" srcdoc={data['text/html'] as string} />;
  return <pre class="cell-text">{String(data['text/plain'] ?? JSON.stringify(data))}</pre>;
}

function CellView({ cell }: { cell: Cell }) {
  return (
    <article class="cell" data-cell={cell.executionCount ?? 'running'}>
      <pre class="cell-code">
        <span class="cell-prompt">In [{cell.executionCount ?? ' '}]:</span> {cell.code}
      </pre>
      {cell.events.map((event, i) => {
        if (event.type === 'stdout' || event.type === 'stderr')
          return (
            <pre key={i} class={`cell-${event.type}`}>
              {event.text}
            </pre>
          );
        if (event.type === 'result') return <Result key={i} data={event.data} />;
        if (event.type === 'error')
          return (
            <pre key={i} class="cell-error" role="alert">
              {event.traceback.length ? event.traceback.join('\n') : `${event.name}: ${event.value}`}
            </pre>
          );
        return null;
      })}
    </article>
  );
}

/** The session's code interpreter as a notebook: each context's newest cells with their outputs, and a cell to run. */
export function CodePanel({ sessionId }: { sessionId: string }) {
  const base = `/v1/sessions/${sessionId}/code`;
  const [contexts, setContexts] = useState<Context[]>([]);
  const [contextId, setContextId] = useState('python');
  const [cells, setCells] = useState<Cell[]>([]);
  const [code, setCode] = useState('');
  const [running, setRunning] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      const listed = (await json<{ contexts: Context[] }>('GET', `${base}/contexts`)).contexts;
      setContexts(listed);
      if (listed.some((c) => c.id === contextId)) setCells((await json<{ cells: Cell[] }>('GET', `${base}/contexts/${contextId}/history`)).cells);
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => void load(), [sessionId, contextId]);
  const run = async () => {
    if (!code.trim()) return;
    const cell: Cell = { code, startedAt: new Date().toISOString(), executionCount: null, events: [] };
    setCells((old) => [...old, cell]);
    setRunning(true);
    try {
      const res = await call('POST', `${base}/run`, { code, contextId });
      await readRecords(res, '\n', (line) => {
        const event = JSON.parse(line) as CodeEvent;
        if (event.type === 'end') cell.executionCount = event.executionCount;
        else cell.events = [...cell.events, event];
        setCells((old) => [...old.slice(0, -1), { ...cell }]);
      });
      setCode('');
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setRunning(false);
      void load();
    }
  };
  return (
    <section aria-label="Code" class="notebook">
      <ErrorAlert error={error} />
      <label>
        Context{' '}
        <select value={contextId} onChange={(e) => setContextId((e.target as HTMLSelectElement).value)}>
          {(contexts.some((c) => c.id === contextId) ? contexts : [{ id: contextId, language: 'python', executionCount: 0, state: 'idle' }, ...contexts]).map(
            (c) => (
              <option key={c.id} value={c.id}>
                {c.id} ({c.language}, {c.state})
              </option>
            ),
          )}
        </select>
      </label>
      {cells.length === 0 && <EmptyState title="No cells yet">Cells this context ran (its newest 20) appear here, with their outputs.</EmptyState>}
      {cells.map((cell, i) => (
        <CellView key={`${cell.startedAt}-${i}`} cell={cell} />
      ))}
      <textarea aria-label="Code to run" rows={4} value={code} onInput={(e) => setCode((e.target as HTMLTextAreaElement).value)} />
      <button type="button" onClick={run} disabled={running}>
        {running ? 'Running…' : 'Run'}
      </button>
    </section>
  );
}
