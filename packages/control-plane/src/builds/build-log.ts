import type { Store } from '../store/store.js';

/** Most of a build's log kept; what comes after is dropped with a note. */
const maxLogChars = 1024 * 1024;
const flushEveryMs = 300;

/** A build's log, written to the store a few times a second (any control plane can serve it), bounded. */
export class BuildLog {
  private text = '';
  private stored = 0;
  private full = false;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly buildId: string,
  ) {}

  line(text: string): void {
    this.append(`${text}\n`);
  }

  append(chunk: string): void {
    if (this.full) return;
    if (this.text.length + chunk.length > maxLogChars) {
      this.text += `${chunk.slice(0, Math.max(0, maxLogChars - this.text.length))}\n[the log is longer than ${maxLogChars} characters: the rest is left out]\n`;
      this.full = true;
    } else this.text += chunk;
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, flushEveryMs);
  }

  /** Stores what is not stored yet; resolves once it is. */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  private flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.stored === this.text.length) return;
      const text = this.text;
      await this.store.updateBuild(this.buildId, { log: text }).catch(() => undefined);
      this.stored = text.length;
    });
    return this.flushing;
  }
}
