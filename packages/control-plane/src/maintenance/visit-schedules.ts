import { type MaintenanceSchedule, type Store, inIdOrder } from '../store/store.js';

/** The next visits one write records (the store splits them in statements of 500). */
const maxPerWrite = 500;

/**
 * The next visits one pass works out, recorded together: at 100,000 sessions a pass works out
 * thousands, and each alone was a statement and a commit on the background connections every other
 * statement of the pass waits for. A write goes once `maxPerWrite` have gathered, and with the rest
 * when the pass ends (`flush`); a visit does not wait for it. Each is recorded only if its row did not
 * change since it was read, as when each wrote its own, and in the order of the ids, so two control
 * planes' writes (during a handover) lock the rows they share in one order. One not recorded (its
 * write failed, the control plane stopped) leaves its session due: the next pass visits it again.
 */
export class VisitSchedules {
  private gathered: MaintenanceSchedule[] = [];
  private readonly writing = new Set<Promise<void>>();

  constructor(
    private readonly store: Pick<Store, 'scheduleMaintenance'>,
    private readonly log: (message: string) => void,
  ) {}

  add(schedule: MaintenanceSchedule): void {
    this.gathered.push(schedule);
    if (this.gathered.length >= maxPerWrite) this.write();
  }

  /** Writes what has gathered and resolves once every write has ended (a failed one is logged). */
  async flush(): Promise<void> {
    if (this.gathered.length) this.write();
    await Promise.all(this.writing);
  }

  private write(): void {
    const batch = this.gathered.sort(inIdOrder);
    this.gathered = [];
    const written = this.store
      .scheduleMaintenance(batch)
      .catch((err: Error) => this.log(`the next visits of ${batch.length} sessions were not recorded (they stay due): ${err.message}`))
      .finally(() => this.writing.delete(written));
    this.writing.add(written);
  }
}
