import { randomBytes } from 'node:crypto';
import { type DataKey, newId } from '@space/protocol';
import type { SecretCipher } from '../store/secret-cipher.js';
import type { Store } from '../store/store.js';

/**
 * Wraps data keys under the cluster's key, so that the store holds none in the clear. The secrets
 * key (`secretsKeyWrap`) by default; a KMS stands in for it by implementing these two calls (its
 * `wrap` an encrypt call, its `unwrap` a decrypt), passed to the control plane as `keyWrap`.
 */
export interface KeyWrap {
  wrap(key: Buffer): Promise<string>;
  /** The key; throws when `wrapped` was wrapped under another cluster key or altered. */
  unwrap(wrapped: string): Promise<Buffer>;
}

/** Data keys wrapped by the secrets key (`SPACE_SECRETS_KEY_FILE`), as secret values are. */
export function secretsKeyWrap(secrets: SecretCipher): KeyWrap {
  return {
    wrap: async (key) => secrets.seal(key.toString('base64')),
    unwrap: async (wrapped) => Buffer.from(secrets.open(wrapped), 'base64'),
  };
}

export interface DataKeysDeps {
  store: Store;
  wrap: KeyWrap;
  now?: () => number;
}

/**
 * Each tenant's data key, which every checkpoint object of its sessions is sealed with on the nodes
 * (AES-256-GCM, `node/src/storage/object-sealing.ts`): made at its first shipment, kept wrapped in
 * the store (one per tenant, whichever control plane made it first), unwrapped here once and sent
 * to a node with each call that stores or reads the tenant's objects.
 */
export class DataKeys {
  private readonly unwrapped = new Map<string, DataKey>();
  private readonly now: () => number;

  constructor(private readonly deps: DataKeysDeps) {
    this.now = deps.now ?? Date.now;
  }

  async forTenant(tenantId: string): Promise<DataKey> {
    const known = this.unwrapped.get(tenantId);
    if (known) return known;
    let row = await this.deps.store.tenantDataKey(tenantId);
    if (!row) {
      const made = { id: newId('dk'), tenantId, wrapped: await this.deps.wrap.wrap(randomBytes(32)), createdAt: new Date(this.now()).toISOString() };
      // Two control planes making one at once: the one whose row landed first is the tenant's.
      row = (await this.deps.store.insertDataKey(made)) ? made : await this.deps.store.tenantDataKey(tenantId);
      if (!row) throw new Error(`the data key of tenant ${tenantId} was neither stored nor found`);
    }
    let key: Buffer;
    try {
      key = await this.deps.wrap.unwrap(row.wrapped);
    } catch (err) {
      throw new Error(
        `the data key ${row.id} of tenant ${tenantId} cannot be unwrapped (${(err as Error).message}): every control plane needs the same SPACE_SECRETS_KEY_FILE`,
      );
    }
    const dataKey: DataKey = { id: row.id, key: key.toString('base64') };
    this.unwrapped.set(tenantId, dataKey);
    return dataKey;
  }
}
