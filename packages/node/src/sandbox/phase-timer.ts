/** Times the phases of a sandbox start or checkpoint, for the log line that says where the time went. */
export class PhaseTimer {
  private readonly start = performance.now();
  private last = this.start;
  private readonly phases: string[] = [];

  mark(name: string): void {
    const now = performance.now();
    this.phases.push(`${name} ${Math.round(now - this.last)}`);
    this.last = now;
  }

  elapsed(): number {
    return performance.now() - this.start;
  }

  summary(): string {
    return `${Math.round(this.last - this.start)} ms (${this.phases.join(', ')})`;
  }
}
