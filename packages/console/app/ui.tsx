import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';

/**
 * A panel's actions and their error: `act(work)` clears the error, runs `work`, keeps its message
 * if it fails, then calls `after` (the panel reloads what the action changed).
 */
export function useAction(after?: () => void): {
  error: string | null;
  setError: (error: string | null) => void;
  act: (work: () => Promise<unknown>) => Promise<void>;
} {
  const [error, setError] = useState<string | null>(null);
  const act = async (work: () => Promise<unknown>) => {
    setError(null);
    await work().catch((e: Error) => setError(e.message));
    after?.();
  };
  return { error, setError, act };
}

/** An error from the API, announced to screen readers. */
export function ErrorAlert({ error }: { error: string | null }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

/** A table's header row; `actions` adds a last column for buttons, named for screen readers only. */
export function TableHead({ columns, actions = false }: { columns: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => (
          <th key={c}>{c}</th>
        ))}
        {actions && (
          <th>
            <span class="visually-hidden">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}

/** What a status means, for its colour: serving, on its way, gone wrong, or at rest. */
const tones: Record<string, 'good' | 'waiting' | 'bad'> = {
  running: 'good',
  ready: 'good',
  succeeded: 'good',
  allowed: 'good',
  starting: 'waiting',
  building: 'waiting',
  queued: 'waiting',
  paused: 'waiting',
  draining: 'waiting',
  failed: 'bad',
  lost: 'bad',
  denied: 'bad',
  error: 'bad',
};

/** A status (of a session, a build, a node) as a badge coloured by what it means. */
export function StatusBadge({ status }: { status: string }) {
  const tone = tones[status];
  return <span class={tone ? `badge ${tone}` : 'badge'}>{status}</span>;
}

/** What a list shows when it has nothing: what is missing and, when there is one, the next step. */
export function EmptyState({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <strong>{title}</strong>
      {children}
    </div>
  );
}

export function Loading() {
  return (
    <p class="loading" aria-live="polite">
      Loading…
    </p>
  );
}

/** A row's delete button: styled as a danger, named for screen readers by what it deletes. */
export function DeleteButton({ label, onClick }: { label: string; onClick: () => void }) {
  return (
    <button type="button" class="danger" aria-label={label} onClick={onClick}>
      Delete
    </button>
  );
}
