import type { SessionDetail } from './session-detail.js';

const width = 900;
const height = 70;
const colors: Record<string, string> = { died: '#d33', lost: '#d33', killed: '#e80', restored: '#88c', idle: '#999', paused: '#999' };

/** The session's sandboxes (bars from start to end, colored by why they ended) and its checkpoints (dots) on one time axis. */
export function Timeline({ session }: { session: SessionDetail }) {
  const sandboxes = session.sandboxHistory ?? [];
  const checkpoints = session.checkpoints ?? [];
  const times = [...sandboxes.map((s) => Date.parse(s.startedAt)), ...checkpoints.map((c) => Date.parse(c.createdAt))];
  if (times.length === 0) return null;
  const start = Math.min(...times);
  const end = Math.max(Date.now(), start + 1000);
  const x = (t: number) => 10 + ((t - start) / (end - start)) * (width - 20);
  return (
    <svg width={width} height={height} role="img" aria-label="Timeline of the session's sandboxes and checkpoints">
      <line x1={10} x2={width - 10} y1={height - 14} y2={height - 14} stroke="#8888" />
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
            fill={s.endedAt ? (colors[s.endReason ?? ''] ?? '#999') : '#3a3'}
          >
            <title>
              {s.id}: {new Date(s.startedAt).toLocaleTimeString()} – {s.endedAt ? `${new Date(s.endedAt).toLocaleTimeString()} (${s.endReason})` : 'running'}
              {s.restoredFrom ? `, restored from ${s.restoredFrom}` : ''}
            </title>
          </rect>
        );
      })}
      {checkpoints.map((c) => (
        <circle key={c.id} cx={x(Date.parse(c.createdAt))} cy={36} r={5} fill={c.kind === 'full' ? '#c80' : '#4a4'}>
          <title>
            {c.id} ({c.kind}) {new Date(c.createdAt).toLocaleTimeString()}
          </title>
        </circle>
      ))}
      <text x={10} y={height - 2} font-size="11" fill="currentColor">
        {new Date(start).toLocaleTimeString()}
      </text>
      <text x={width - 10} y={height - 2} font-size="11" fill="currentColor" text-anchor="end">
        now
      </text>
    </svg>
  );
}
