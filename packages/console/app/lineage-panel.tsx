import { useEffect, useState } from 'preact/hooks';
import { json } from './api.js';
import type { SessionDetail } from './session-detail.js';
import { ErrorAlert, useAction } from './ui.js';

/** Sessions read to draw a family: enough for what an agent forks; more are left out with a note. */
const maxSessions = 100;
const rowHeight = 56;
const indent = 40;
const boxWidth = 230;

interface Node {
  session: SessionDetail;
  depth: number;
  row: number;
}

/** The family of `current`: its root ancestor and every session forked from it, depth first. */
function family(all: SessionDetail[], current: string): Node[] {
  const owner = new Map<string, SessionDetail>();
  for (const s of all) for (const c of s.checkpoints ?? []) owner.set(c.id, s);
  const byId = new Map(all.map((s) => [s.id, s]));
  let root = byId.get(current);
  for (let hops = 0; root?.parentCheckpointId && owner.has(root.parentCheckpointId) && hops < 100; hops++) root = owner.get(root.parentCheckpointId);
  if (!root) return [];
  const children = (s: SessionDetail) => all.filter((c) => c.parentCheckpointId && owner.get(c.parentCheckpointId)?.id === s.id);
  const nodes: Node[] = [];
  const visit = (s: SessionDetail, depth: number) => {
    if (nodes.some((n) => n.session.id === s.id)) return;
    nodes.push({ session: s, depth, row: nodes.length });
    for (const child of children(s)) visit(child, depth + 1);
  };
  visit(root, 0);
  return nodes;
}

/**
 * The lineage as a graph: each session a box, its checkpoints as dots along its row, a line from
 * a checkpoint to every session forked from it. A checkpoint chosen can be forked, or restored
 * into this session ("keep the winner"). Redrawn as the tenant's events come.
 */
export function LineagePanel({ session, changes }: { session: SessionDetail; changes: number }) {
  const [nodes, setNodes] = useState<Node[]>([]);
  const [truncated, setTruncated] = useState(false);
  const [chosen, setChosen] = useState<string | null>(null);
  const { error, setError, act } = useAction();
  useEffect(() => {
    void (async () => {
      const { sessions } = await json<{ sessions: { id: string }[] }>('GET', '/v1/sessions');
      setTruncated(sessions.length > maxSessions);
      const details = await Promise.all(sessions.slice(-maxSessions).map((s) => json<SessionDetail>('GET', `/v1/sessions/${s.id}`).catch(() => null)));
      setNodes(
        family(
          details.filter((d): d is SessionDetail => d !== null),
          session.id,
        ),
      );
    })().catch((e: Error) => setError(e.message));
  }, [session.id, changes]);
  const rowOf = new Map(nodes.map((n) => [n.session.id, n]));
  const dotX = (n: Node, i: number) => n.depth * indent + boxWidth + 20 + i * 22;
  const width = Math.max(600, ...nodes.map((n) => dotX(n, (n.session.checkpoints ?? []).length) + 20));
  return (
    <section aria-label="Lineage">
      <ErrorAlert error={error} />
      {truncated && <p>Only the newest {maxSessions} sessions are drawn.</p>}
      <svg class="chart" width={width} height={Math.max(1, nodes.length) * rowHeight + 10} role="img" aria-label={`Lineage of ${session.id}`}>
        {nodes.flatMap((n) =>
          (n.session.checkpoints ?? []).flatMap((c, i) =>
            nodes
              .filter((child) => child.session.parentCheckpointId === c.id)
              .map((child) => (
                <path
                  key={`${c.id}-${child.session.id}`}
                  // From the checkpoint's dot down to the fork's box, entering it from the right.
                  d={`M ${dotX(n, i)} ${n.row * rowHeight + 24} C ${dotX(n, i)} ${child.row * rowHeight + 24}, ${dotX(n, i)} ${child.row * rowHeight + 24}, ${child.depth * indent + boxWidth} ${child.row * rowHeight + 24}`}
                  class="edge"
                />
              )),
          ),
        )}
        {nodes.map((n) => (
          <g key={n.session.id} data-lineage-session={n.session.id}>
            <a href={`#/sessions/${n.session.id}`}>
              <rect
                x={n.depth * indent}
                y={n.row * rowHeight + 8}
                width={boxWidth}
                height={32}
                rx={6}
                class={n.session.id === session.id ? 'box current' : 'box'}
              />
              <text x={n.depth * indent + 8} y={n.row * rowHeight + 29} class={n.session.id === session.id ? 'box-label current' : 'box-label'}>
                {n.session.id} · {n.session.status}
              </text>
            </a>
            {(n.session.checkpoints ?? []).map((c, i) => (
              // biome-ignore lint/a11y/useSemanticElements: an SVG shape, where no <button> can be drawn; it is focusable and answers Enter
              <circle
                key={c.id}
                data-lineage-checkpoint={c.id}
                cx={dotX(n, i)}
                cy={n.row * rowHeight + 24}
                r={chosen === c.id ? 9 : 7}
                class={`checkpoint-${c.kind}`}
                tabIndex={0}
                role="button"
                aria-label={`Checkpoint ${c.id} (${c.kind})`}
                onClick={() => setChosen(c.id)}
                onKeyDown={(e) => (e.key === 'Enter' || e.key === ' ') && setChosen(c.id)}
              >
                <title>
                  {c.id} ({c.kind}) {new Date(c.createdAt).toLocaleTimeString()}
                </title>
              </circle>
            ))}
          </g>
        ))}
      </svg>
      {chosen && (
        <form class="inline" onSubmit={(e) => e.preventDefault()}>
          <span>{chosen}</span>
          <button type="button" onClick={() => act(() => json('POST', `/v1/checkpoints/${chosen}/fork`, { count: 2 }))}>
            Fork 2 from it
          </button>
          <button type="button" onClick={() => act(() => json('POST', `/v1/sessions/${session.id}/restore`, { checkpointId: chosen }))}>
            Restore {session.id} to it
          </button>
        </form>
      )}
      <p>{rowOf.size} session(s) in this lineage. Green dots: file checkpoints; orange: with memory.</p>
    </section>
  );
}
