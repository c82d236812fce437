/** A session as `GET /v1/sessions/:id` answers it, as far as the session page's panels read it. */
export interface SessionDetail {
  id: string;
  status: string;
  template: string;
  parentCheckpointId: string | null;
  egress: { mode: 'allow-all' | 'deny-all' | 'allow-list'; domains: string[]; cidrs: string[] };
  sandboxHistory?: { id: string; startedAt: string; endedAt: string | null; endReason: string | null; restoredFrom: string | null; note: string | null }[];
  checkpoints?: { id: string; kind: string; createdAt: string }[];
}
