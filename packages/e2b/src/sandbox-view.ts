import { e2bEnvdVersion } from '@space/protocol';
import type { SessionData } from '@space/sdk';

/** `running` while a sandbox serves the session; every other session is `paused`: its next call resumes it. */
export function e2bState(session: SessionData): 'running' | 'paused' {
  return session.sandbox || session.status === 'starting' ? 'running' : 'paused';
}

/** When the session ends: its timeout, or (none set) far away. */
function endAt(session: SessionData): string {
  return session.expiresAt ?? new Date(Date.parse(session.createdAt) + 10 * 365 * 24 * 3600 * 1000).toISOString();
}

/** What `POST /sandboxes` and `connect` answer: how to reach the sandbox's data plane. */
export function createdSandbox(session: SessionData, accessToken: string): Record<string, unknown> {
  return {
    templateID: session.template,
    sandboxID: session.id,
    clientID: 'space',
    envdVersion: e2bEnvdVersion,
    envdAccessToken: accessToken,
    // The code interpreter's context calls carry this one instead of envd's (the same session token).
    trafficAccessToken: accessToken,
    domain: null,
  };
}

/** A sandbox in `GET /sandboxes` and `GET /v2/sandboxes`. */
export function listedSandbox(session: SessionData): Record<string, unknown> {
  return {
    templateID: session.template,
    sandboxID: session.id,
    clientID: 'space',
    startedAt: session.sandbox?.startedAt ?? session.createdAt,
    endAt: endAt(session),
    cpuCount: Math.max(1, Math.ceil(session.resources.cpus)),
    memoryMB: session.resources.memoryMb,
    diskSizeMB: Math.round((session.resources.diskGb ?? 0) * 1024),
    metadata: session.metadata,
    state: e2bState(session),
    envdVersion: e2bEnvdVersion,
    volumeMounts: [],
  };
}

/** `GET /sandboxes/:id`. */
export function sandboxDetail(session: SessionData): Record<string, unknown> {
  return {
    ...listedSandbox(session),
    allowInternetAccess: session.egress.mode !== 'deny-all',
    lifecycle: { onTimeout: session.onTimeout === 'pause' ? 'pause' : 'kill', autoResume: session.onTimeout === 'pause' },
    domain: null,
  };
}
