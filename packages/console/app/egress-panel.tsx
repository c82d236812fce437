import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import { TableHead } from './ui.js';

interface Policy {
  mode: 'allow-all' | 'deny-all' | 'allow-list';
  domains: string[];
  cidrs: string[];
}

interface AuditEntry {
  time: string;
  scheme: string;
  host: string;
  method: string;
  path: string;
  status: number;
  decision: string;
  secrets: string[];
}

/** The session's egress: its policy (changed live) and the audit of what left the sandbox, secrets by name. */
export function EgressPanel({ sessionId, policy }: { sessionId: string; policy: Policy }) {
  const [mode, setMode] = useState(policy.mode);
  const [domains, setDomains] = useState(policy.domains.join('\n'));
  const [cidrs, setCidrs] = useState(policy.cidrs.join('\n'));
  const [audit, setAudit] = useState<AuditEntry[]>([]);
  const [message, setMessage] = useState<string | null>(null);
  const base = `/v1/sessions/${sessionId}/egress`;
  const loadAudit = () => json<{ entries: AuditEntry[] }>('GET', `${base}/audit?limit=100`).then((r) => setAudit(r.entries));
  useEffect(() => void loadAudit().catch(() => undefined), [sessionId]);
  const save = async (event: Event) => {
    event.preventDefault();
    const lines = (text: string) => text.split(/[\s,]+/).filter(Boolean);
    try {
      await json('PUT', base, { mode, domains: lines(domains), cidrs: lines(cidrs) });
      setMessage('Policy saved: it applies at once.');
    } catch (e) {
      setMessage((e as Error).message);
    }
  };
  return (
    <section aria-label="Egress">
      <form onSubmit={save}>
        <p>
          <label for="egress-mode">Outbound traffic</label>{' '}
          <select id="egress-mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value as Policy['mode'])}>
            <option value="allow-all">allow all</option>
            <option value="deny-all">deny all</option>
            <option value="allow-list">allow only these</option>
          </select>
        </p>
        {mode === 'allow-list' && (
          <p>
            <label for="egress-domains">Domains (one per line, *.example.com for names below)</label>
            <br />
            <textarea id="egress-domains" rows={4} cols={40} value={domains} onInput={(e) => setDomains((e.target as HTMLTextAreaElement).value)} />
            <br />
            <label for="egress-cidrs">Networks (CIDR)</label>
            <br />
            <textarea id="egress-cidrs" rows={2} cols={40} value={cidrs} onInput={(e) => setCidrs((e.target as HTMLTextAreaElement).value)} />
          </p>
        )}
        <button type="submit">Save policy</button> {message && <span role="status">{message}</span>}
      </form>
      <h2>
        Audit{' '}
        <button type="button" onClick={() => void loadAudit()}>
          Refresh
        </button>
      </h2>
      <table>
        <TableHead columns={['Time', 'Request', 'Status', 'Decision', 'Secrets injected']} />
        <tbody>
          {audit.map((a, i) => (
            <tr key={`${a.time}-${i}`}>
              <td>{new Date(a.time).toLocaleTimeString()}</td>
              <td>
                {a.method} {a.scheme}://{a.host}
                {a.path}
              </td>
              <td>{a.status}</td>
              <td>{a.decision}</td>
              <td>{a.secrets.join(', ')}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
