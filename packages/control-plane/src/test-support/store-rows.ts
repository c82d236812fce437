import type { SessionRow } from '../store/store.js';

/** A session row with every field set, as tests store it. */
export const session = (id: string, tenantId: string, createdAt = new Date().toISOString()): SessionRow => ({
  id,
  tenantId,
  template: 'tiny',
  status: 'running',
  createdAt,
  env: { A: '1' },
  resources: { memoryMb: 512, cpus: 1, pids: 256 },
  metadata: { k: 'v' },
  sandboxId: 'sbx_x',
  nodeId: 'node_x',
  sandboxStartedAt: new Date().toISOString(),
  parentCheckpointId: null,
  checkpointIntervalSec: 60,
  fullCheckpointIntervalSec: 600,
  onResume: 'files',
  resumeNote: null,
  expiresAt: '2030-01-01T00:00:00.000Z',
  onTimeout: 'pause',
  services: [{ name: 'web', cmd: ['python3', '-m', 'http.server'], port: 8000 }],
  volumes: [],
  publicPorts: [8000],
  cwd: '/app',
  codeCheckpointDelayMs: 1000,
  placementEpoch: 0,
  lastActiveAt: null,
  volumeNodeId: 'node_x',
  idleTimeoutSec: 900,
  secrets: [{ name: 'TOKEN', secret: 'TOKEN' }],
  egress: { mode: 'allow-list', domains: ['*.example.com'], cidrs: [] },
});

/** A checkpoint row: full with a size, fs without. */
export const checkpoint = (id: string, sessionId: string, tenantId: string, sizeBytes: number | null = null) => ({
  id,
  sessionId,
  tenantId,
  kind: sizeBytes === null ? ('fs' as const) : ('full' as const),
  trigger: 'manual' as const,
  nodeId: 'node_x',
  createdAt: new Date().toISOString(),
  sizeBytes,
  pauseMs: sizeBytes === null ? null : 120,
  volumes: [],
});
