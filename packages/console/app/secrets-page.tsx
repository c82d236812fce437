import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import { DeleteButton, EmptyState, ErrorAlert, TableHead } from './ui.js';

interface Secret {
  name: string;
  hosts: string[];
  placeholder: string;
  updatedAt: string;
}

/** The tenant's secrets: names and hosts only (values are write-only): set, rotate, delete. */
export function SecretsPage() {
  const [secrets, setSecrets] = useState<Secret[]>([]);
  const [name, setName] = useState('');
  const [value, setValue] = useState('');
  const [hosts, setHosts] = useState('');
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    json<{ secrets: Secret[] }>('GET', '/v1/secrets')
      .then((r) => setSecrets(r.secrets))
      .catch((e: Error) => setError(e.message));
  useEffect(() => void load(), []);
  const save = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await json('PUT', `/v1/secrets/${encodeURIComponent(name)}`, { value, hosts: hosts.split(/[\s,]+/).filter(Boolean) });
      setValue('');
      await load();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const remove = async (secret: string) => {
    if (!confirm(`Delete the secret ${secret}? Sandboxes using it stop getting its value.`)) return;
    await json('DELETE', `/v1/secrets/${encodeURIComponent(secret)}`).catch((e: Error) => setError(e.message));
    await load();
  };
  return (
    <section aria-labelledby="secrets-title">
      <h1 id="secrets-title">Secrets</h1>
      <p>A sandbox sees a placeholder; the node's gateway puts the value into requests to the secret's hosts only.</p>
      <form class="inline" onSubmit={save}>
        <label for="secret-name">Name</label>
        <input id="secret-name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <label for="secret-value">Value</label>
        <input id="secret-value" type="password" autocomplete="off" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
        <label for="secret-hosts">Hosts</label>
        <input id="secret-hosts" placeholder="api.example.com" value={hosts} onInput={(e) => setHosts((e.target as HTMLInputElement).value)} />
        <button type="submit">Set</button>
      </form>
      <ErrorAlert error={error} />
      {secrets.length === 0 ? (
        <EmptyState title="No secrets.">Set one above: its value never enters a sandbox.</EmptyState>
      ) : (
        <table>
          <TableHead columns={['Name', 'Hosts', 'Placeholder', 'Updated']} actions />
          <tbody>
            {secrets.map((s) => (
              <tr key={s.name} data-secret={s.name}>
                <td>{s.name}</td>
                <td>{s.hosts.join(', ')}</td>
                <td>
                  <code>{s.placeholder}</code>
                </td>
                <td>{new Date(s.updatedAt).toLocaleString()}</td>
                <td>
                  <button type="button" onClick={() => (setName(s.name), setHosts(s.hosts.join(', ')))}>
                    Rotate
                  </button>{' '}
                  <DeleteButton label={`Delete secret ${s.name}`} onClick={() => remove(s.name)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
