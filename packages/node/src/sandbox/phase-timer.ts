import { activeSpan, recordChildSpan, spanClockNs } from '@space/server-kit';

/**
 * Times the phases of a sandbox start or checkpoint, for the log line that says where the time
 * went; in a traced call, each phase is also a span of the one it was made in.
 */
export class PhaseTimer {
  private readonly start = performance.now();
  private last = this.start;
  private readonly phases: string[] = [];
  private readonly span = activeSpan();
  private lastNs = this.span ? spanClockNs() : 0n;

  mark(name: string): void {
    const now = performance.now();
    this.phases.push(`${name} ${Math.round(now - this.last)}`);
    this.last = now;
    if (this.span) {
      const nowNs = spanClockNs();
      recordChildSpan(this.span, name, this.lastNs, nowNs);
      this.lastNs = nowNs;
    }
  }

  elapsed(): number {
    return performance.now() - this.start;
  }

  summary(): string {
    return `${Math.round(this.last - this.start)} ms (${this.phases.join(', ')})`;
  }
}
