import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import { useTenantEvents } from './events.js';
import { LineagePanel } from './lineage-panel.js';
import { EgressPanel } from './egress-panel.js';
import { FilesPanel } from './files-panel.js';
import { ChangesPanel } from './changes-panel.js';
import { CodePanel } from './code-panel.js';
import { DesktopPanel } from './desktop-panel.js';
import { HistoryPanel } from './history-panel.js';
import type { SessionDetail } from './session-detail.js';
import { SessionTerminal } from './terminal.js';
import { ErrorAlert, Loading, StatusBadge, TableHead } from './ui.js';

const tabs = ['Terminal', 'Code', 'Desktop', 'Files', 'Processes', 'History', 'Changes', 'Lineage', 'Egress'] as const;
type Tab = (typeof tabs)[number];

interface ProcessRow {
  pid: number;
  cmd: string | string[];
  running: boolean;
  exitCode: number | null;
}

function ProcessesPanel({ sessionId }: { sessionId: string }) {
  const [processes, setProcesses] = useState<ProcessRow[]>([]);
  const [attached, setAttached] = useState<number | null>(null);
  const load = () => json<{ processes: ProcessRow[] }>('GET', `/v1/sessions/${sessionId}/processes`).then((r) => setProcesses(r.processes));
  useEffect(() => void load(), [sessionId]);
  const signal = async (pid: number) => {
    await json('POST', `/v1/sessions/${sessionId}/processes/${pid}/signal`, { signal: 'SIGTERM' });
    await load();
  };
  return (
    <section aria-label="Processes">
      <button type="button" onClick={load}>
        Refresh
      </button>
      <table>
        <TableHead columns={['PID', 'Command', 'State']} actions />
        <tbody>
          {processes.map((p) => (
            <tr key={p.pid}>
              <td>{p.pid}</td>
              <td>{Array.isArray(p.cmd) ? p.cmd.join(' ') : p.cmd}</td>
              <td>{p.running ? 'running' : `exited ${p.exitCode}`}</td>
              <td>
                <button type="button" aria-label={`Attach to process ${p.pid}`} onClick={() => setAttached(p.pid)}>
                  Attach
                </button>{' '}
                {p.running && (
                  <button type="button" aria-label={`Stop process ${p.pid}`} onClick={() => signal(p.pid)}>
                    Stop
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {attached !== null && (
        <div data-attached={attached}>
          <h3>Process {attached}</h3>
          <SessionTerminal sessionId={sessionId} attach={attached} />
        </div>
      )}
    </section>
  );
}

/** One session: its terminal, files, processes, and the history of its sandboxes and checkpoints. */
export function SessionPage({ id }: { id: string }) {
  const [session, setSession] = useState<SessionDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tab, setTab] = useState<Tab>('Terminal');
  const load = () =>
    json<SessionDetail>('GET', `/v1/sessions/${id}`)
      .then((s) => (setSession(s), setError(null)))
      .catch((e: Error) => setError(e.message));
  useEffect(() => {
    void load();
    const timer = setInterval(load, 30_000);
    return () => clearInterval(timer);
  }, [id]);
  const [changes, setChanges] = useState(0);
  useTenantEvents((event) => {
    if (event.sessionId === id) void load();
    setChanges((n) => n + 1);
  });
  if (error && !session) return <ErrorAlert error={error} />;
  if (!session) return <Loading />;
  return (
    <section aria-labelledby="session-title">
      <h1 id="session-title">
        <span class="mono">{session.id}</span> <StatusBadge status={session.status} />
      </h1>
      <p>
        Template {session.template}
        {session.parentCheckpointId && <> · forked from {session.parentCheckpointId}</>}
      </p>
      <div class="tabs" role="tablist">
        {tabs.map((t) => (
          <button key={t} type="button" role="tab" aria-selected={tab === t} onClick={() => setTab(t)}>
            {t}
          </button>
        ))}
      </div>
      {tab === 'Terminal' && <SessionTerminal sessionId={id} />}
      {tab === 'Code' && <CodePanel sessionId={id} />}
      {tab === 'Desktop' && <DesktopPanel sessionId={id} />}
      {tab === 'Files' && <FilesPanel sessionId={id} />}
      {tab === 'Processes' && <ProcessesPanel sessionId={id} />}
      {tab === 'History' && <HistoryPanel session={session} onChange={load} />}
      {tab === 'Changes' && <ChangesPanel session={session} onChange={load} />}
      {tab === 'Lineage' && <LineagePanel session={session} changes={changes} />}
      {tab === 'Egress' && <EgressPanel sessionId={id} policy={session.egress} />}
    </section>
  );
}
