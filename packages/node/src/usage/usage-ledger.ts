import { appendFile, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { type NodeUsageBatch, NodeUsageBatchSchema, newId } from '@space/protocol';
import { z } from 'zod';
import { readJsonFile, replaceFile } from '../json-file.js';
import { persistentValue } from '../node-config.js';

/** A sandbox's counters at the end of the last batch: the next batch counts from there. */
const BaselineSchema = z.object({ sessionId: z.string(), tenantId: z.string().nullable(), cpuNanos: z.number(), at: z.number() }).strict();
type Baseline = z.infer<typeof BaselineSchema>;
const BaselinesSchema = z.record(BaselineSchema);

/** Batches a control plane has not acknowledged, at most: past it, the node's meter keeps adding to the open period instead. */
export const maxPendingBatches = 240;

/**
 * The node's usage batches until a control plane acknowledges them, on disk so that a restarted
 * node agent sends what it measured before: `batches.jsonl` (one batch per line, appended),
 * `acked` (the highest acknowledged seq), `baselines.json` (each sandbox's counters at the last
 * batch) and `ledger-id`, made once with the data directory: batches are numbered within it.
 */
export class UsageLedger {
  /** Writes one at a time: an acknowledgement's rewrite must not drop a line appended meanwhile. */
  private writes: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    readonly id: string,
    private pending: NodeUsageBatch[],
    private lastSeq: number,
    private acked: number,
    readonly baselines: Map<string, Baseline>,
  ) {}

  static async open(dir: string): Promise<UsageLedger> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const id = await persistentValue(path.join(dir, 'ledger-id'), () => newId('led', 16));
    const acked = Number((await readFile(path.join(dir, 'acked'), 'utf8').catch(() => '0')).trim()) || 0;
    const lines = (await readFile(path.join(dir, 'batches.jsonl'), 'utf8').catch(() => '')).split('\n');
    // A line a crash cut short is skipped: it was never sent (a batch is sent once written).
    const batches = lines.flatMap((line) => {
      const parsed = NodeUsageBatchSchema.safeParse(safeJson(line));
      return parsed.success && parsed.data.ledger === id ? [parsed.data] : [];
    });
    const baselines = (await readJsonFile(path.join(dir, 'baselines.json'), BaselinesSchema)) ?? {};
    const lastSeq = Math.max(acked, ...batches.map((b) => b.seq));
    return new UsageLedger(
      dir,
      id,
      batches.filter((b) => b.seq > acked),
      lastSeq,
      acked,
      new Map(Object.entries(baselines)),
    );
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  /** The oldest batches not acknowledged yet: at most `max`, and no more than `maxBytes` of JSON past the first. */
  unacknowledged(max: number, maxBytes = Number.POSITIVE_INFINITY): NodeUsageBatch[] {
    const taken: NodeUsageBatch[] = [];
    let bytes = 0;
    for (const batch of this.pending.slice(0, max)) {
      bytes += JSON.stringify(batch).length;
      if (taken.length > 0 && bytes > maxBytes) break;
      taken.push(batch);
    }
    return taken;
  }

  /** Numbers and writes a batch, with the baselines it ends at. */
  append(period: Omit<NodeUsageBatch, 'ledger' | 'seq'>): Promise<void> {
    return this.write(async () => {
      const batch: NodeUsageBatch = { ledger: this.id, seq: this.lastSeq + 1, ...period };
      await appendFile(path.join(this.dir, 'batches.jsonl'), `${JSON.stringify(batch)}\n`, { mode: 0o600 });
      this.lastSeq = batch.seq;
      this.pending.push(batch);
      await this.writeBaselines();
    });
  }

  saveBaselines(): Promise<void> {
    return this.write(() => this.writeBaselines());
  }

  /** The batches through `through` are stored by a control plane: forgotten here (an ack of another ledger is ignored). */
  acknowledge(ledger: string, through: number): Promise<void> {
    return this.write(async () => {
      if (ledger !== this.id || through <= this.acked) return;
      this.acked = Math.min(through, this.lastSeq);
      // Recorded before the file is cut: a crash in between leaves batches the next start skips.
      await replaceFile(path.join(this.dir, 'acked'), `${this.acked}\n`);
      this.pending = this.pending.filter((b) => b.seq > this.acked);
      await replaceFile(path.join(this.dir, 'batches.jsonl'), this.pending.map((b) => `${JSON.stringify(b)}\n`).join(''));
    });
  }

  private writeBaselines(): Promise<void> {
    return replaceFile(path.join(this.dir, 'baselines.json'), JSON.stringify(Object.fromEntries(this.baselines)));
  }

  private write(work: () => Promise<void>): Promise<void> {
    const done = this.writes.then(work);
    this.writes = done.catch(() => undefined);
    return done;
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}
