import { appendFile, mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { EgressAuditEntrySchema, type EgressAuditEntry } from '@space/protocol';

/** A session's log is rotated past this size; one older file is kept. */
const rotateAtBytes = 4 * 1024 * 1024;

/**
 * The egress audit log: one JSON line per request a sandbox sent out, per session, in the node's
 * data directory. Entries name the secrets injected, never their values.
 */
export class AuditLog {
  private readonly sizes = new Map<string, number>();

  constructor(private readonly dir: string) {}

  private file(sessionId: string, generation = 0): string {
    return path.join(this.dir, `${sessionId}.jsonl${generation ? `.${generation}` : ''}`);
  }

  async append(sessionId: string, entry: EgressAuditEntry): Promise<void> {
    const line = `${JSON.stringify(entry)}\n`;
    const file = this.file(sessionId);
    let size = this.sizes.get(sessionId);
    if (size === undefined) {
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      size = (await stat(file).catch(() => ({ size: 0 }))).size;
    }
    if (size + line.length > rotateAtBytes) {
      await rename(file, this.file(sessionId, 1)).catch(() => undefined);
      size = 0;
    }
    this.sizes.set(sessionId, size + Buffer.byteLength(line));
    await appendFile(file, line, { mode: 0o600 });
  }

  /** The newest `limit` entries, oldest first. */
  async read(sessionId: string, limit: number): Promise<EgressAuditEntry[]> {
    const lines: string[] = [];
    for (const generation of [0, 1]) {
      const text = await readFile(this.file(sessionId, generation), 'utf8').catch(() => '');
      lines.unshift(...text.split('\n').filter(Boolean));
      if (lines.length >= limit) break;
    }
    return lines.slice(-limit).flatMap((line) => {
      try {
        const parsed = EgressAuditEntrySchema.safeParse(JSON.parse(line));
        return parsed.success ? [parsed.data] : [];
      } catch {
        return []; // a line torn by a crash
      }
    });
  }

  async remove(sessionId: string): Promise<void> {
    this.sizes.delete(sessionId);
    await rm(this.file(sessionId), { force: true });
    await rm(this.file(sessionId, 1), { force: true });
  }
}
