import { useState } from 'preact/hooks';
import { json } from './api.js';
import type { SessionDetail } from './session-detail.js';
import { Timeline } from './timeline.js';
import { ErrorAlert, TableHead, useAction } from './ui.js';

/** The session's sandboxes (start, end, why) and checkpoints, with checkpoint, fork and restore. */
export function HistoryPanel({ session, onChange }: { session: SessionDetail; onChange: () => void }) {
  const { error, act } = useAction(onChange);
  const [forks, setForks] = useState<string[]>([]);
  const base = `/v1/sessions/${session.id}`;
  return (
    <section aria-label="History">
      <Timeline session={session} />
      <h2>Sandboxes</h2>
      <table>
        <TableHead columns={['Sandbox', 'Started', 'Ended', 'Why', 'Restored from', 'Note']} />
        <tbody>
          {(session.sandboxHistory ?? []).map((h) => (
            <tr key={h.id} data-sandbox={h.id}>
              <td>{h.id}</td>
              <td>{new Date(h.startedAt).toLocaleTimeString()}</td>
              <td>{h.endedAt ? new Date(h.endedAt).toLocaleTimeString() : 'running'}</td>
              <td>{h.endReason ?? ''}</td>
              <td>{h.restoredFrom ?? ''}</td>
              <td>{h.note ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Checkpoints</h2>
      <form class="inline" onSubmit={(e) => e.preventDefault()}>
        <button type="button" onClick={() => act(async () => void (await json('POST', `${base}/checkpoints`, { kind: 'fs' })))}>
          Checkpoint files
        </button>
        <button type="button" onClick={() => act(async () => void (await json('POST', `${base}/checkpoints`, { kind: 'full' })))}>
          Checkpoint with memory
        </button>
        <button class="danger" type="button" onClick={() => act(async () => void (await json('POST', `${base}/sandbox/kill`)))}>
          Kill the sandbox
        </button>
      </form>
      <ErrorAlert error={error} />
      <table>
        <TableHead columns={['Checkpoint', 'Kind', 'Taken']} actions />
        <tbody>
          {(session.checkpoints ?? []).map((c) => (
            <tr key={c.id} data-checkpoint={c.id}>
              <td>{c.id}</td>
              <td>{c.kind}</td>
              <td>{new Date(c.createdAt).toLocaleTimeString()}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Fork 2 from ${c.id}`}
                  onClick={() =>
                    act(async () => {
                      const made = await json<{ sessions: { id: string }[] }>('POST', `/v1/checkpoints/${c.id}/fork`, { count: 2 });
                      setForks((f) => [...f, ...made.sessions.map((s) => s.id)]);
                    })
                  }
                >
                  Fork 2
                </button>{' '}
                <button
                  type="button"
                  aria-label={`Restore ${c.id}`}
                  onClick={() => act(async () => void (await json('POST', `${base}/restore`, { checkpointId: c.id })))}
                >
                  Restore
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {forks.length > 0 && (
        <p>
          Forks:{' '}
          {forks.map((id) => (
            <a key={id} href={`#/sessions/${id}`} data-fork={id}>
              {id}{' '}
            </a>
          ))}
        </p>
      )}
    </section>
  );
}
