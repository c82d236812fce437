import { randomBytes } from 'node:crypto';
import { ErrorCode, SpaceError, type EgressAuditEntry, type EgressPolicy, type PutSecretRequest, type Secret, type SessionEgressConfig } from '@space/protocol';
import type { Caller } from './auth.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import { archivedAuditEntries, type SecretRow, type SessionRow, type Store } from '../store/store.js';
import type { SecretCipher } from '../store/secret-cipher.js';

/**
 * Secrets and egress policies. Values live in the store (encrypted) and travel only to the node agent's
 * gateway (in memory there); a sandbox sees a placeholder in the env var named like the secret.
 * Any change is pushed to the node at once, so it applies to the next request without a restart.
 */
export class EgressService {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
    private readonly cipher: SecretCipher,
    private readonly log: (message: string) => void,
  ) {}

  async list(caller: Caller): Promise<Secret[]> {
    return (await this.store.listSecrets(caller.tenantId)).map(toSecret);
  }

  async put(caller: Caller, name: string, request: PutSecretRequest): Promise<Secret> {
    const now = new Date().toISOString();
    const existing = await this.store.getSecret(caller.tenantId, name);
    const row = await this.store.putSecret({
      tenantId: caller.tenantId,
      name,
      value: this.cipher.seal(request.value),
      hosts: [...new Set(request.hosts)],
      placeholder: existing?.placeholder ?? `SPACE_SECRET_${name}_${randomBytes(12).toString('hex')}`,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
    });
    await this.pushForSecret(caller.tenantId, name);
    return toSecret(row);
  }

  /** Sessions naming a deleted secret keep its placeholder, which then reaches no host as a value. */
  async delete(caller: Caller, name: string): Promise<void> {
    if (!(await this.store.deleteSecret(caller.tenantId, name))) throw new SpaceError(ErrorCode.SECRET_NOT_FOUND, `no secret ${JSON.stringify(name)}`);
    await this.pushForSecret(caller.tenantId, name);
  }

  /** Checks a new session's secret names and env against each other; returns nothing, throws clearly. */
  async validateSession(tenantId: string, secrets: string[], env: Record<string, string>): Promise<void> {
    for (const name of secrets) {
      if (!(await this.store.getSecret(tenantId, name)))
        throw new SpaceError(ErrorCode.SECRET_NOT_FOUND, `no secret ${JSON.stringify(name)}: create it first with PUT /v1/secrets/${name}`);
      if (name in env)
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, `env ${name} is also a secret name: the sandbox's ${name} holds the secret's placeholder`);
    }
  }

  /** The env vars that carry the session's placeholders. */
  async placeholders(row: SessionRow): Promise<Record<string, string>> {
    return Object.fromEntries((await this.secretsOf(row)).map((s) => [s.name, s.placeholder]));
  }

  async configFor(row: SessionRow): Promise<SessionEgressConfig> {
    return {
      policy: row.egress,
      secrets: (await this.secretsOf(row)).map(({ name, placeholder, value, hosts }) => ({ name, placeholder, value: this.cipher.open(value), hosts })),
    };
  }

  async setPolicy(row: SessionRow, policy: EgressPolicy): Promise<void> {
    await this.store.setSessionEgress(row.id, policy);
    await this.push({ ...row, egress: policy }, true);
  }

  /**
   * The session's egress audit: what its node holds, with what the store kept of nodes it left
   * (see `keepAudit`), each request once, oldest first.
   */
  async audit(row: SessionRow, limit: number): Promise<{ entries: EgressAuditEntry[] }> {
    const [kept, live] = await Promise.all([this.store.listArchivedEgressAudit(row.id, limit), (await this.nodes.forVolume(row)).egressAudit(row.id, limit)]);
    const byContent = new Map([...kept, ...live.entries].map((e) => [JSON.stringify(e), e]));
    return { entries: [...byContent.values()].sort((a, b) => a.time.localeCompare(b.time)).slice(-limit) };
  }

  /**
   * Keeps in the store the session's audit that `node` holds, before that node deletes it (the
   * session left it: a move, a drain, a copy cut off by a partition): what any sandbox of the
   * session did out there stays in its audit. Throws if the node does not answer, so the caller
   * keeps what the node holds until it does.
   */
  async keepAudit(sessionId: string, node: Pick<NodeClient, 'egressAudit'>): Promise<void> {
    const { entries } = await node.egressAudit(sessionId, archivedAuditEntries);
    await this.store.archiveEgressAudit(sessionId, entries);
  }

  /**
   * Sends a session's settings to the node. `required`: a failure is the caller's error (a policy
   * change must not silently stay unapplied); otherwise it is logged and the node gets the settings
   * with the next sandbox start or the next maintenance pass.
   */
  async push(row: SessionRow, required = false): Promise<void> {
    if (!row.sandboxId) return;
    try {
      await (await this.nodes.forSandbox(row)).configureEgress(row.id, await this.configFor(row));
    } catch (err) {
      if (required) throw err;
      this.log(`egress settings of ${row.id} not sent to the node: ${(err as Error).message}`);
    }
  }

  /** Re-sends settings the node lacks (it restarted while sandboxes kept running). */
  async repairNode(missing: string[]): Promise<void> {
    for (const row of await this.store.findSessions(missing)) await this.push(row);
  }

  private async pushForSecret(tenantId: string, name: string): Promise<void> {
    for (const row of await this.store.listSessions(tenantId)) if (row.secrets.includes(name)) await this.push(row);
  }

  private async secretsOf(row: SessionRow): Promise<SecretRow[]> {
    const secrets = await Promise.all(row.secrets.map((name) => this.store.getSecret(row.tenantId, name)));
    return secrets.filter((s): s is SecretRow => s !== null);
  }
}

function toSecret(row: SecretRow): Secret {
  return { name: row.name, hosts: row.hosts, placeholder: row.placeholder, createdAt: row.createdAt, updatedAt: row.updatedAt };
}
