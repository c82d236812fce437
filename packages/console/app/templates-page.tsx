import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import { parseMetrics } from './metrics-text.js';
import { DeleteButton, EmptyState, ErrorAlert, TableHead } from './ui.js';

interface Template {
  name: string;
  version: number;
  builtIn: boolean;
  source: string;
  createdAt: string | null;
  sessions: number;
  config: { cmd: string | string[] | null; workdir: string; user: string } | null;
}

/** The tenant's templates (where each comes from, its sessions, its command) and the warm pools' ready sandboxes. */
export function TemplatesPage() {
  const [templates, setTemplates] = useState<Template[]>([]);
  const [pools, setPools] = useState<[string, number][]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    try {
      setTemplates((await json<{ templates: Template[] }>('GET', '/v1/templates')).templates);
      const metrics = parseMetrics(await (await fetch('/metrics')).text());
      setPools(
        [...metrics].flatMap(([series, value]) => (/^space_pool_ready\{template="([^"]+)"\}$/.exec(series) ? [[/"([^"]+)"/.exec(series)![1]!, value]] : [])),
      );
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => void load(), []);
  const remove = async (name: string) => {
    if (!confirm(`Delete every version of ${name}? Sessions made from it keep their files.`)) return;
    await json('DELETE', `/v1/templates/${encodeURIComponent(name)}?force=1`).catch((e: Error) => setError(e.message));
    await load();
  };
  return (
    <section aria-labelledby="templates-title">
      <h1 id="templates-title">Templates</h1>
      <p>Make one from a session, a Dockerfile or an image with the CLI (`space template create | build | import`) or the API.</p>
      <ErrorAlert error={error} />
      <table>
        <TableHead columns={['Name', 'Version', 'Source', 'Sessions', 'Command', 'Made']} actions />
        <tbody>
          {templates.map((t) => (
            <tr key={t.name} data-template={t.name}>
              <td>{t.name}</td>
              <td>{t.builtIn ? '-' : t.version}</td>
              <td>{t.source}</td>
              <td>{t.sessions}</td>
              <td>{t.config?.cmd ? (Array.isArray(t.config.cmd) ? t.config.cmd.join(' ') : t.config.cmd) : ''}</td>
              <td>{t.createdAt ? new Date(t.createdAt).toLocaleString() : ''}</td>
              <td>{!t.builtIn && <DeleteButton label={`Delete template ${t.name}`} onClick={() => remove(t.name)} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Warm pools</h2>
      {pools.length === 0 ? (
        <EmptyState title="No warm pools.">Sandboxes boot for each new session (set SPACE_POOL_SIZE to keep some ready).</EmptyState>
      ) : (
        <table>
          <TableHead columns={['Template', 'Ready sandboxes']} />
          <tbody>
            {pools.map(([template, ready]) => (
              <tr key={template}>
                <td>{template}</td>
                <td>{ready}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
