import { appendFile, mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { EgressAuditEntrySchema, type EgressAuditEntry } from '@space/protocol';
import { KeyedQueue } from '@space/server-kit';

/** A session's log is rotated past this size; one older file is kept. */
const rotateAtBytes = 4 * 1024 * 1024;

/**
 * The egress audit log: one JSON line per request a sandbox sent out, per session, in the node's
 * data directory. Entries name the secrets injected, never their values. A session's entries are
 * written one at a time, in order, and a read waits for those being written: the log shows every
 * request answered before it was asked.
 */
export class AuditLog {
  private readonly sizes = new Map<string, number>();
  private readonly writes = new KeyedQueue();

  constructor(private readonly dir: string) {}

  private file(sessionId: string, generation = 0): string {
    return path.join(this.dir, `${sessionId}.jsonl${generation ? `.${generation}` : ''}`);
  }

  append(sessionId: string, entry: EgressAuditEntry): Promise<void> {
    return this.writes.run(sessionId, () => this.write(sessionId, entry));
  }

  private async write(sessionId: string, entry: EgressAuditEntry): Promise<void> {
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
    await this.writes.drained(sessionId);
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
    await this.writes.drained(sessionId);
    this.sizes.delete(sessionId);
    await rm(this.file(sessionId), { force: true });
    await rm(this.file(sessionId, 1), { force: true });
  }
}
