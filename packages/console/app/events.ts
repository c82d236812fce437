import { useEffect, useRef } from 'preact/hooks';
import { call, readRecords } from './api.js';

export interface TenantEvent {
  type: 'session.created' | 'session.status' | 'session.deleted' | 'checkpoint.created' | 'checkpoint.deleted';
  sessionId: string;
  status?: string;
  checkpointId?: string;
  parentCheckpointId?: string | null;
}

/**
 * The tenant's event stream (`GET /v1/events`), read with fetch so the console's header goes along
 * (an EventSource cannot send one); reconnects after a drop. Returns the stop.
 */
function subscribe(onEvent: (event: TenantEvent) => void): () => void {
  const abort = new AbortController();
  const run = async (): Promise<void> => {
    while (!abort.signal.aborted) {
      try {
        const res = await call('GET', '/v1/events', undefined, undefined, abort.signal);
        await readRecords(res, '\n\n', (record) => {
          const data = record
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice(6))
            .join('\n');
          if (data) onEvent(JSON.parse(data) as TenantEvent);
        });
      } catch {
        // Dropped or refused: tried again shortly.
      }
      if (!abort.signal.aborted) await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void run();
  return () => abort.abort();
}

/** Calls `onEvent` (the newest one given) with each of the tenant's events while the component is shown. */
export function useTenantEvents(onEvent: (event: TenantEvent) => void): void {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => subscribe((event) => handler.current(event)), []);
}
