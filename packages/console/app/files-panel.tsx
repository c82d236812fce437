import { useEffect, useState } from 'preact/hooks';
import { call, json, q } from './api.js';
import { ErrorAlert, TableHead } from './ui.js';

interface Entry {
  path: string;
  name: string;
  type: string;
  size: number;
}

const parentOf = (p: string) => p.replace(/\/[^/]+\/?$/, '') || '/';

/** The sandbox's files: browse, view text, download, upload (a file input or drag and drop). */
export function FilesPanel({ sessionId }: { sessionId: string }) {
  const base = `/v1/sessions/${sessionId}/files`;
  const [dir, setDir] = useState('/workspace');
  const [entries, setEntries] = useState<Entry[]>([]);
  const [viewing, setViewing] = useState<{ path: string; text: string } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [over, setOver] = useState(false);
  const load = () =>
    json<{ entries: Entry[] }>('GET', `${base}/list${q(dir)}`)
      .then((r) => (setEntries(r.entries), setError(null)))
      .catch((e: Error) => setError(e.message));
  useEffect(() => void load(), [dir]);
  const upload = async (files: FileList | null) => {
    for (const file of Array.from(files ?? []))
      await call('PUT', `${base}${q(`${dir}/${file.name}`)}`, undefined, file).catch((e: Error) => setError(e.message));
    await load();
  };
  const view = async (path: string) => {
    const text = await (await call('GET', `${base}${q(path)}`)).text();
    setViewing({ path, text: text.slice(0, 200_000) });
  };
  const download = async (entry: Entry) => {
    const blob = await (await call('GET', `${base}${q(entry.path)}`)).blob();
    const link = document.createElement('a');
    link.href = URL.createObjectURL(blob);
    link.download = entry.name;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  };
  return (
    <section
      aria-label="Files"
      class={over ? 'drop over' : 'drop'}
      onDragOver={(e) => (e.preventDefault(), setOver(true))}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        void upload(e.dataTransfer?.files ?? null);
      }}
    >
      <form class="inline" onSubmit={(e) => (e.preventDefault(), load())}>
        <label for="dir">Directory</label>
        <input id="dir" value={dir} onChange={(e) => setDir((e.target as HTMLInputElement).value)} />
        <button type="button" onClick={() => setDir(parentOf(dir))}>
          Up
        </button>
        <label for="upload">Upload</label>
        <input id="upload" type="file" multiple onChange={(e) => upload((e.target as HTMLInputElement).files)} />
      </form>
      <ErrorAlert error={error} />
      <table>
        <TableHead columns={['Name', 'Type', 'Size']} actions />
        <tbody>
          {entries.map((entry) => (
            <tr key={entry.path} data-file={entry.name}>
              <td>
                {entry.type === 'directory' ? (
                  <button type="button" onClick={() => setDir(entry.path)}>
                    {entry.name}/
                  </button>
                ) : (
                  <button type="button" onClick={() => view(entry.path)}>
                    {entry.name}
                  </button>
                )}
              </td>
              <td>{entry.type}</td>
              <td>{entry.size}</td>
              <td>
                {entry.type === 'file' && (
                  <button type="button" aria-label={`Download ${entry.name}`} onClick={() => download(entry)}>
                    Download
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {viewing && (
        <div>
          <h3>{viewing.path}</h3>
          <pre class="view">{viewing.text}</pre>
        </div>
      )}
      <p>Drop files here to upload them into {dir}.</p>
    </section>
  );
}
