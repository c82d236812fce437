import { ErrorCode, PLACEMENT_HEADER, type Placement, SpaceError, parsePlacementHeader } from '@space/protocol';
import { renameSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { readJsonFile } from './json-file.js';

const EpochsFileSchema = z.record(z.string(), z.number().int().nonnegative());

/**
 * The newest placement of each session this node has seen (see protocol's placement.ts), from the
 * calls that name one. A call naming an older one is refused before it does anything; one naming a
 * newer one raises it (the store placed the session anew). Kept in a file beside the sandbox records
 * (written when an epoch rises, which is once per sandbox start or move), so a restarted node refuses
 * what it refused before. Sessions whose volume leaves the node are forgotten.
 */
export class PlacementEpochs {
  private constructor(
    private readonly newest: Map<string, number>,
    private readonly file: string | null,
  ) {}

  /** Epochs kept in `file` (null: in memory only), read back from what it holds. */
  static async open(file: string | null): Promise<PlacementEpochs> {
    const saved = file ? await readJsonFile(file, EpochsFileSchema) : null;
    return new PlacementEpochs(new Map(Object.entries(saved ?? {})), file);
  }

  static inMemory(): PlacementEpochs {
    return new PlacementEpochs(new Map(), null);
  }

  /** Admits a call's placement (null: the call names none, as from a control plane of an older version). */
  admit(placement: Placement | null): void {
    if (!placement) return;
    const newest = this.newest.get(placement.sessionId) ?? 0;
    if (placement.epoch < newest)
      throw new SpaceError(
        ErrorCode.PLACEMENT_STALE,
        `session ${placement.sessionId} was placed anew (epoch ${newest}) since the placement this call names (${placement.epoch}): its control plane read the session before that`,
        { sessionId: placement.sessionId, epoch: newest },
      );
    if (placement.epoch > newest) {
      this.newest.set(placement.sessionId, placement.epoch);
      this.save();
    }
  }

  /** The placement a request names in its header; a malformed one is refused. */
  static of(req: IncomingMessage): Placement | null {
    const value = req.headers[PLACEMENT_HEADER];
    if (value === undefined) return null;
    const placement = parsePlacementHeader(value);
    if (!placement) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${PLACEMENT_HEADER} must be "<session id> <epoch>"`);
    return placement;
  }

  /** The newest epoch seen for the session (0: none). */
  epochOf(sessionId: string): number {
    return this.newest.get(sessionId) ?? 0;
  }

  forget(sessionId: string): void {
    if (this.newest.delete(sessionId)) this.save();
  }

  // Synchronous, so an admitted call's raise is on disk before the call acts; written whole to a
  // temporary file and renamed over the old one, so a crash mid-write leaves the previous epochs.
  private save(): void {
    if (!this.file) return;
    writeFileSync(`${this.file}.tmp`, JSON.stringify(Object.fromEntries(this.newest)), { mode: 0o600 });
    renameSync(`${this.file}.tmp`, this.file);
  }
}
