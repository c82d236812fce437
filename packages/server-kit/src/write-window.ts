interface Waiting<T, R> {
  item: T;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/**
 * Items to store that arrive close together, written together: the items added within `windowMs` of
 * the first go to one call of `write` (at most `maxPerWrite` to a call), which answers each item's
 * result in order. Each `add` resolves once its write has, so a caller that answers only then
 * answers for something stored, as when each wrote its own; a failed write rejects each of its items.
 * At most `maxWritesAtOnce` writes are under way: what comes meanwhile waits for one to end and goes
 * in the next, so a slow database gets fewer, bigger writes rather than more of them at once.
 */
export class WriteWindow<T, R> {
  private waiting: Waiting<T, R>[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing = 0;

  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    private readonly windowMs: number,
    private readonly maxPerWrite: number,
    private readonly maxWritesAtOnce = Number.POSITIVE_INFINITY,
  ) {}

  /** Resolves with the item's result once it is written with the items that came within the window; rejects with the write's error. */
  add(item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.timer ??= setTimeout(() => this.flush(), this.windowMs);
    });
  }

  private flush(): void {
    this.timer = null;
    while (this.waiting.length > 0 && this.writing < this.maxWritesAtOnce) this.writeTogether(this.waiting.splice(0, this.maxPerWrite));
  }

  private writeTogether(batch: Waiting<T, R>[]): void {
    this.writing++;
    this.write(batch.map((w) => w.item))
      .then(
        (results) => {
          for (const [i, w] of batch.entries()) w.resolve(results[i]!);
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => {
        this.writing--;
        // What waited for this write has waited its window already.
        if (this.timer === null) this.flush();
      });
  }
}
