import { Api } from '../client.js';
import type { FuzzTarget } from './fuzz-types.js';

/** The platform settings a fuzz run uses: few sessions per tenant (valid creates are cheap to clean up), no rate limit in the way. */
/**
 * The fuzzed platform's settings. A call queued behind the session's lifecycle operations (the
 * fuzzer's own pauses, restores and kills) waits at most 10 s for its turn, then gets SESSION_BUSY:
 * with the default 30 s, a call waiting by design looked like a hang past the fuzzer's 20 s bound
 * (seen once in CI, seed 116917707, with a pause among them on a loaded machine).
 */
export const fuzzPlatformEnv = {
  SPACE_TENANT_MAX_SESSIONS: '4',
  SPACE_TENANT_REQUESTS_PER_SEC: '10000',
  SPACE_TENANT_MAX_CHECKPOINT_GB: '1',
  SPACE_LIFECYCLE_WAIT_MS: '10000',
};

/** The JSON a call answered; anything but a 2xx is an error (the target must exist before fuzzing). */
async function body(api: Api, method: string, path: string, payload?: unknown): Promise<any> {
  const reply = await api.call(method, path, payload);
  if (reply.status >= 300) throw new Error(`${method} ${path}: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

/**
 * A tenant of its own on the platform with what the fuzzer names: a session (tiny) running a
 * background process, an fs checkpoint of it, a secret, a session token of it.
 */
export async function prepareFuzzTarget(url: string, adminKey: string): Promise<FuzzTarget> {
  const admin = new Api(url, adminKey);
  const { id: tenantId } = await body(admin, 'POST', '/v1/tenants', { name: 'fuzz' });
  const { key } = await body(admin, 'POST', '/v1/keys', { tenantId });
  const tenant = new Api(url, key);
  const session = await tenant.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
  const { pid } = await tenant.exec(session.id, 'sleep 3600', { background: true });
  const checkpoint = await body(tenant, 'POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' });
  await body(tenant, 'PUT', '/v1/secrets/FUZZ_TOKEN', { value: 'v', hosts: ['example.com'] });
  const { token: accessToken } = await body(tenant, 'POST', `/v1/sessions/${session.id}/tokens`);
  await body(tenant, 'POST', '/v1/volumes', { name: 'fuzz-data', sizeGb: 0.1 });
  const { id: volumeSnapshotId } = await body(tenant, 'POST', '/v1/volumes/fuzz-data/snapshots');
  return {
    url,
    key,
    adminKey,
    sessionId: session.id,
    checkpointId: checkpoint.id,
    secretName: 'FUZZ_TOKEN',
    volumeName: 'fuzz-data',
    volumeSnapshotId,
    pid,
    accessToken,
  };
}

/** Deletes every session of the fuzzer's tenant (the ones it made by valid creates and forks too), then its volumes; returns how many sessions. */
export async function deleteFuzzSessions(target: FuzzTarget): Promise<number> {
  const tenant = new Api(target.url, target.key);
  const { sessions } = await body(tenant, 'GET', '/v1/sessions');
  for (const s of sessions as { id: string }[]) await body(tenant, 'DELETE', `/v1/sessions/${s.id}`);
  const { volumes } = await body(tenant, 'GET', '/v1/volumes');
  for (const v of volumes as { name: string }[]) await body(tenant, 'DELETE', `/v1/volumes/${v.name}`);
  return sessions.length;
}
