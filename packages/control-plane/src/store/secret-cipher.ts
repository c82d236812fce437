import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

const prefix = 'v1:';

/**
 * Encrypts secret values at rest (AES-256-GCM, a random nonce per value), so the store's file alone
 * gives no secret away. The key lives in its own file (`SPACE_SECRETS_KEY_FILE`, default
 * `<data>/secrets.key`, 0600): keep it off the database's backups, or on another volume.
 */
export class SecretCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('the secrets key must be 32 bytes');
  }

  /** Loads the key, creating it on first use. */
  static async load(file: string): Promise<SecretCipher> {
    if (!existsSync(file)) {
      await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      await writeFile(`${file}.new`, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
      await rename(`${file}.new`, file);
    }
    const hex = (await readFile(file, 'utf8')).trim();
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${file} must hold 64 hex digits (a 256-bit key)`);
    return new SecretCipher(Buffer.from(hex, 'hex'));
  }

  seal(value: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return prefix + Buffer.concat([nonce, cipher.getAuthTag(), body]).toString('base64');
  }

  /** The value; throws if it was sealed with another key or altered. */
  open(sealed: string): string {
    if (!sealed.startsWith(prefix)) throw new Error('not a sealed secret value');
    const raw = Buffer.from(sealed.slice(prefix.length), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
  }
}
