import { useState } from 'preact/hooks';
import { call, json, q } from './api.js';
import type { SessionDetail } from './session-detail.js';
import { Timeline } from './timeline.js';
import { ErrorAlert, TableHead, useAction } from './ui.js';

interface DiffEntry {
  path: string;
  change: string;
  type: string;
  from?: string;
  sizeBefore: number | null;
  sizeAfter: number | null;
}

interface DiffPage {
  from: string;
  to: string;
  entries: DiffEntry[];
  next: string | null;
}

/** The diff's `to` naming the session's files now (the control plane checkpoints them first). */
const live = 'live';

const size = (bytes: number | null) => (bytes === null ? '–' : `${bytes} B`);

/**
 * What changed between two points of the session: two of its checkpoints, or one and its files now.
 * Points are picked in the lists or on the timeline (a click on a dot: first the earlier, then the
 * later). Each changed path: its unified diff, the file as it was at either point, and put back as
 * it was at the earlier one (the session is checkpointed first, so that can be undone too).
 */
export function ChangesPanel({ session, onChange }: { session: SessionDetail; onChange: () => void }) {
  const checkpoints = session.checkpoints ?? [];
  const [from, setFrom] = useState(checkpoints[0]?.id ?? '');
  const [to, setTo] = useState(live);
  const [pickingTo, setPickingTo] = useState(false);
  const [page, setPage] = useState<DiffPage | null>(null);
  const [shown, setShown] = useState<{ title: string; text: string } | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const { error, act } = useAction();
  // The next pages compare the same two checkpoints: `live` became the one the first page names.
  const compare = (more?: DiffPage) =>
    act(async () => {
      const query = new URLSearchParams({ to: more?.to ?? to, ...(more?.next ? { after: more.next } : {}) });
      const next = await json<DiffPage>('GET', `/v1/checkpoints/${from}/diff?${query}`);
      setPage(more ? { ...next, entries: [...more.entries, ...next.entries] } : next);
      setShown(null);
      if (!more && to === live) onChange();
    });
  const pick = (id: string) => {
    if (pickingTo) setTo(id);
    else setFrom(id);
    setPickingTo(!pickingTo);
  };
  const showDiff = (entry: DiffEntry, diff: DiffPage) =>
    act(async () => {
      const file = await json<{
        unified: string | null;
        sizeBefore: number | null;
        sizeAfter: number | null;
        sha256Before: string | null;
        sha256After: string | null;
      }>('GET', `/v1/checkpoints/${diff.from}/diff/file?${new URLSearchParams({ to: diff.to, path: entry.path })}`);
      const summary = `not text (or too different to show): ${size(file.sizeBefore)} → ${size(file.sizeAfter)}, sha256 ${file.sha256Before ?? '–'} → ${file.sha256After ?? '–'}`;
      setShown({ title: `${entry.path}: ${diff.from} → ${diff.to}`, text: file.unified === '' ? 'no differences' : (file.unified ?? summary) });
    });
  const open = (path: string, checkpointId: string) =>
    act(async () => {
      const text = await (await call('GET', `/v1/checkpoints/${checkpointId}/files${q(path)}`)).text();
      setShown({ title: `${path} in ${checkpointId}`, text: text.slice(0, 200_000) });
    });
  const restore = (entry: DiffEntry, diff: DiffPage) =>
    act(async () => {
      const path = entry.from ?? entry.path;
      const done = await json<{ undoCheckpointId: string; files: number; directories: number }>('POST', `/v1/sessions/${session.id}/files/restore`, {
        checkpointId: diff.from,
        path,
      });
      setNote(
        `${path} put back as in ${diff.from} (${done.files} files, ${done.directories} directories); to undo, restore checkpoint ${done.undoCheckpointId}`,
      );
      onChange();
    });
  const point = (id: string) => {
    const checkpoint = checkpoints.find((c) => c.id === id);
    return checkpoint ? `${checkpoint.id} (${checkpoint.kind}, ${new Date(checkpoint.createdAt).toLocaleTimeString()})` : id;
  };
  return (
    <section aria-label="Changes">
      <Timeline session={session} picked={[from, to]} onPick={pick} />
      <form class="inline" onSubmit={(e) => (e.preventDefault(), compare())}>
        <label for="diff-from">From</label>
        <select id="diff-from" value={from} onChange={(e) => setFrom((e.target as HTMLSelectElement).value)}>
          {checkpoints.map((c) => (
            <option key={c.id} value={c.id}>
              {point(c.id)}
            </option>
          ))}
        </select>
        <label for="diff-to">To</label>
        <select id="diff-to" value={to} onChange={(e) => setTo((e.target as HTMLSelectElement).value)}>
          <option value={live}>its files now</option>
          {checkpoints.map((c) => (
            <option key={c.id} value={c.id}>
              {point(c.id)}
            </option>
          ))}
        </select>
        <button type="submit" disabled={!from}>
          Compare
        </button>
      </form>
      {checkpoints.length === 0 && <p class="muted">The session has no checkpoints yet: take one in History.</p>}
      <ErrorAlert error={error} />
      {note && (
        <p role="status" data-restored>
          {note}
        </p>
      )}
      {page && (
        <>
          <p>
            {page.entries.length === 0 ? 'No differences' : `${page.entries.length}${page.next ? '+' : ''} paths changed`} from {page.from} to {page.to}
            {to === live && ' (its files now, checkpointed)'}.
          </p>
          <table>
            <TableHead columns={['Change', 'Type', 'Path', 'Before', 'After']} actions />
            <tbody>
              {page.entries.map((e) => (
                <tr key={e.path} data-change={e.path}>
                  <td>{e.change}</td>
                  <td>{e.type}</td>
                  <td class="mono">
                    {e.path}
                    {e.from ? ` (from ${e.from})` : ''}
                  </td>
                  <td>{size(e.sizeBefore)}</td>
                  <td>{size(e.sizeAfter)}</td>
                  <td>
                    {e.type === 'file' && (
                      <button type="button" aria-label={`Diff of ${e.path}`} onClick={() => showDiff(e, page)}>
                        Diff
                      </button>
                    )}{' '}
                    {e.type === 'file' && e.sizeBefore !== null && (
                      <button type="button" aria-label={`Open ${e.from ?? e.path} as before`} onClick={() => open(e.from ?? e.path, page.from)}>
                        Before
                      </button>
                    )}{' '}
                    {e.type === 'file' && e.sizeAfter !== null && (
                      <button type="button" aria-label={`Open ${e.path} as after`} onClick={() => open(e.path, page.to)}>
                        After
                      </button>
                    )}{' '}
                    {e.change !== 'added' && (
                      <button type="button" aria-label={`Restore ${e.from ?? e.path} from ${page.from}`} onClick={() => restore(e, page)}>
                        Restore
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {page.next && (
            <button type="button" onClick={() => compare(page)}>
              More
            </button>
          )}
        </>
      )}
      {shown && (
        <figure data-shown>
          <figcaption class="mono">{shown.title}</figcaption>
          <pre>{shown.text}</pre>
        </figure>
      )}
    </section>
  );
}
