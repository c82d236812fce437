import type { SessionDetail } from './session-detail.js';

const width = 900;
const height = 70;
/** Why a sandbox ended, as the design system's tone of its bar (styles.css `.chart`). */
const tones: Record<string, string> = {
  died: 'bad',
  lost: 'bad',
  oom: 'bad',
  pids: 'bad',
  killed: 'waiting',
  restored: 'accent',
  idle: 'rest',
  paused: 'rest',
};

/**
 * The session's sandboxes (bars from start to end, colored by why they ended) and its checkpoints
 * (dots) on one time axis. With `onPick`, a dot is a button that picks its checkpoint; `picked` are ringed.
 */
export function Timeline({ session, picked = [], onPick }: { session: SessionDetail; picked?: string[]; onPick?: (checkpointId: string) => void }) {
  const sandboxes = session.sandboxHistory ?? [];
  const checkpoints = session.checkpoints ?? [];
  const times = [...sandboxes.map((s) => Date.parse(s.startedAt)), ...checkpoints.map((c) => Date.parse(c.createdAt))];
  if (times.length === 0) return null;
  const start = Math.min(...times);
  const end = Math.max(Date.now(), start + 1000);
  const x = (t: number) => 10 + ((t - start) / (end - start)) * (width - 20);
  return (
    <svg class="chart" width={width} height={height} role="img" aria-label="Timeline of the session's sandboxes and checkpoints">
      <line class="axis" x1={10} x2={width - 10} y1={height - 14} y2={height - 14} />
      {sandboxes.map((s) => {
        const from = x(Date.parse(s.startedAt));
        const to = x(s.endedAt ? Date.parse(s.endedAt) : end);
        return (
          <rect
            key={s.id}
            data-timeline-sandbox={s.id}
            x={from}
            y={8}
            width={Math.max(2, to - from)}
            height={16}
            class={s.endedAt ? (tones[s.endReason ?? ''] ?? 'rest') : 'good'}
          >
            <title>
              {s.id}: {new Date(s.startedAt).toLocaleTimeString()} – {s.endedAt ? `${new Date(s.endedAt).toLocaleTimeString()} (${s.endReason})` : 'running'}
              {s.restoredFrom ? `, restored from ${s.restoredFrom}` : ''}
            </title>
          </rect>
        );
      })}
      {checkpoints.map((c) => (
        <circle
          key={c.id}
          data-timeline-checkpoint={c.id}
          class={`checkpoint-${c.kind}${picked.includes(c.id) ? ' picked' : ''}${onPick ? ' pickable' : ''}`}
          cx={x(Date.parse(c.createdAt))}
          cy={36}
          r={5}
          {...(onPick
            ? {
                role: 'button',
                tabIndex: 0,
                'aria-label': `Pick checkpoint ${c.id}`,
                onClick: () => onPick(c.id),
                onKeyDown: (e: KeyboardEvent) => (e.key === 'Enter' || e.key === ' ') && (e.preventDefault(), onPick(c.id)),
              }
            : {})}
        >
          <title>
            {c.id} ({c.kind}) {new Date(c.createdAt).toLocaleTimeString()}
          </title>
        </circle>
      ))}
      <text x={10} y={height - 2} class="label">
        {new Date(start).toLocaleTimeString()}
      </text>
      <text x={width - 10} y={height - 2} class="label" text-anchor="end">
        now
      </text>
    </svg>
  );
}
