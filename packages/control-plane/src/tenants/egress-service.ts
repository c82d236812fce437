import { randomBytes } from 'node:crypto';
import {
  ErrorCode,
  SpaceError,
  type EgressAuditEntry,
  type EgressPolicy,
  type PutSecretRequest,
  type Secret,
  type SecretGrant,
  type SessionEgressConfig,
} from '@space/protocol';
import type { Caller } from './auth.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import { archivedAuditEntries, type SecretRow, type SessionRow, type SessionSecret, type Store } from '../store/store.js';
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
      placeholder: existing?.placeholder ?? newPlaceholder(name),
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

  /** Checks a new session's secrets and env against each other; returns nothing, throws clearly. */
  async validateSession(tenantId: string, secrets: SecretGrant[], env: Record<string, string>): Promise<void> {
    for (const { name, secret } of secrets) {
      if (!(await this.store.getSecret(tenantId, secret)))
        throw new SpaceError(ErrorCode.SECRET_NOT_FOUND, `no secret ${JSON.stringify(secret)}: create it first with PUT /v1/secrets/${secret}`);
      if (name in env)
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, `env ${name} is also a secret name: the sandbox's ${name} holds the secret's placeholder`);
    }
  }

  /**
   * A fork's secrets: its parent's, or `requested` instead. A name the parent had keeps the
   * placeholder the parent's env var holds, which a memory fork's processes hold too: in the fork's
   * gateway it stands for the fork's grant, never the parent's. Any other grant whose secret's
   * placeholder is already one of those gets one of its own, so one placeholder means one value.
   */
  async forkSecrets(parent: SessionRow, requested: SecretGrant[] | undefined): Promise<SessionSecret[]> {
    if (!requested) return parent.secrets;
    await this.validateSession(parent.tenantId, requested, parent.env);
    const held = new Map((await this.grantsOf(parent)).map((g) => [g.name, g.placeholder]));
    const taken = new Set(requested.flatMap((g) => held.get(g.name) ?? []));
    const secrets: SessionSecret[] = [];
    for (const grant of requested) {
      const own = (await this.store.getSecret(parent.tenantId, grant.secret))?.placeholder;
      const placeholder = held.get(grant.name) ?? (own && taken.has(own) ? newPlaceholder(grant.name) : own);
      secrets.push(placeholder === own ? grant : { ...grant, placeholder });
    }
    return secrets;
  }

  /**
   * Takes a secret from this session only, and tells its node at once (required: a revocation must
   * not silently stay unapplied). Done already, it still tells the node, so a retry after a failed
   * push completes it. Written only over the secrets it read, so revocations at once all stay.
   */
  async revoke(row: SessionRow, name: string): Promise<void> {
    let current = row;
    for (let attempt = 0; attempt < 5; attempt++) {
      const secrets = current.secrets.filter((g) => g.name !== name);
      if (secrets.length === current.secrets.length || (await this.store.setSessionSecrets(current.id, current.secrets, secrets))) {
        await this.push({ ...current, secrets }, true);
        return;
      }
      const again = await this.store.getSession(current.tenantId, current.id);
      if (!again) throw new SpaceError(ErrorCode.SESSION_NOT_FOUND, `no session ${current.id}`);
      current = again;
    }
    throw new SpaceError(ErrorCode.SESSION_BUSY, `the secrets of ${row.id} kept changing while ${name} was revoked: try again`);
  }

  /** The env vars that carry the session's placeholders. */
  async placeholders(row: SessionRow): Promise<Record<string, string>> {
    return Object.fromEntries((await this.grantsOf(row)).map((g) => [g.name, g.placeholder]));
  }

  async configFor(row: SessionRow): Promise<SessionEgressConfig> {
    return {
      policy: row.egress,
      secrets: (await this.grantsOf(row)).map(({ name, placeholder, value, hosts }) => ({ name, placeholder, value: this.cipher.open(value), hosts })),
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

  /**
   * Re-sends the settings a node says it lacks (its agent restarted while sandboxes kept running),
   * for those of the sessions it names that run there: a node is never sent another's.
   */
  async repairNode(nodeId: string, missing: string[]): Promise<void> {
    for (const row of await this.store.findSessions(missing)) if (row.nodeId === nodeId) await this.push(row);
  }

  private async pushForSecret(tenantId: string, name: string): Promise<void> {
    for (const row of await this.store.listSessions(tenantId)) if (row.secrets.some((g) => g.secret === name)) await this.push(row);
  }

  /** Each of the session's secrets that still exists: its env var, the placeholder that holds, the secret's (sealed) value and hosts. */
  private async grantsOf(row: SessionRow): Promise<{ name: string; placeholder: string; value: string; hosts: string[] }[]> {
    const rows = await Promise.all(row.secrets.map((grant) => this.store.getSecret(row.tenantId, grant.secret)));
    return row.secrets.flatMap((grant, i) => {
      const secret = rows[i];
      return secret ? [{ name: grant.name, placeholder: grant.placeholder ?? secret.placeholder, value: secret.value, hosts: secret.hosts }] : [];
    });
  }
}

/** What a sandbox sees in place of a secret's value: unguessable, and named so that a person reading it knows what it stands for. */
function newPlaceholder(name: string): string {
  return `SPACE_SECRET_${name}_${randomBytes(12).toString('hex')}`;
}

function toSecret(row: SecretRow): Secret {
  return { name: row.name, hosts: row.hosts, placeholder: row.placeholder, createdAt: row.createdAt, updatedAt: row.updatedAt };
}
