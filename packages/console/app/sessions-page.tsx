import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import { useTenantEvents } from './events.js';
import { DeleteButton, EmptyState, ErrorAlert, Loading, StatusBadge, TableHead } from './ui.js';

interface SessionRow {
  id: string;
  status: string;
  template: string;
  nodeId: string | null;
  createdAt: string;
  parentCheckpointId: string | null;
  lastCheckpointAt: string | null;
}

function age(iso: string): string {
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

/** The tenant's sessions: filter, create, delete; refreshed as the tenant's events come. */
export function SessionsPage() {
  const [sessions, setSessions] = useState<SessionRow[] | null>(null);
  const [templates, setTemplates] = useState<string[]>(['base', 'tiny']);
  const [template, setTemplate] = useState('base');
  const [filter, setFilter] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const load = () =>
    json<{ sessions: SessionRow[] }>('GET', '/v1/sessions')
      .then((r) => setSessions(r.sessions))
      .catch((e: Error) => setError(e.message));
  useEffect(() => {
    void load();
    void json<{ templates: { name: string }[] }>('GET', '/v1/templates').then((r) => setTemplates(r.templates.map((t) => t.name)));
    // Events say when something changed; a slow poll is only the fallback.
    const timer = setInterval(load, 30_000);
    return () => clearInterval(timer);
  }, []);
  useTenantEvents(() => void load());
  const create = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const made = await json<SessionRow>('POST', '/v1/sessions', { template });
      location.hash = `#/sessions/${made.id}`;
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const remove = async (id: string) => {
    if (!confirm(`Delete session ${id} with its files and checkpoints?`)) return;
    await json('DELETE', `/v1/sessions/${id}`).catch((e: Error) => setError(e.message));
    await load();
  };
  const shown = (sessions ?? []).filter((s) => !filter || `${s.id} ${s.status} ${s.template}`.includes(filter));
  return (
    <section aria-labelledby="sessions-title">
      <h1 id="sessions-title">Sessions</h1>
      <form class="inline" onSubmit={create}>
        <label for="template">Template</label>
        <select id="template" value={template} onChange={(e) => setTemplate((e.target as HTMLSelectElement).value)}>
          {templates.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <button type="submit" disabled={busy}>
          {busy ? 'Creating…' : 'Create session'}
        </button>
        <label for="filter">Filter</label>
        <input id="filter" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
      </form>
      <ErrorAlert error={error} />
      {sessions === null ? (
        <Loading />
      ) : shown.length === 0 ? (
        <EmptyState title={filter ? 'No session matches the filter.' : 'No sessions.'}>
          {!filter && 'Create one above, or with the API, the SDK or `space create`.'}
        </EmptyState>
      ) : (
        <table>
          <TableHead columns={['Session', 'Status', 'Template', 'Node', 'Age', 'Last checkpoint', 'Forked from']} actions />
          <tbody>
            {shown.map((s) => (
              <tr key={s.id} data-session={s.id}>
                <td>
                  <a href={`#/sessions/${s.id}`}>{s.id}</a>
                </td>
                <td>
                  <StatusBadge status={s.status} />
                </td>
                <td>{s.template}</td>
                <td>{s.nodeId ?? '-'}</td>
                <td>{age(s.createdAt)}</td>
                <td>{s.lastCheckpointAt ? `${age(s.lastCheckpointAt)} ago` : '-'}</td>
                <td>{s.parentCheckpointId ?? '-'}</td>
                <td>
                  <DeleteButton label={`Delete ${s.id}`} onClick={() => remove(s.id)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
