/**
 * What came into a sandbox from outside (the calls and streams relayed to its daemon, services
 * started in it), so the node can say when nothing could have written its volume since a
 * checkpoint: only a process in the sandbox writes it, and a process starts only through an entry.
 * Reads (a file read, a listing) do not count. Maintenance then skips asking the node whether the
 * volume changed (a sync in the sandbox and btrfs commands on the host) for a sandbox left alone.
 */
export class SandboxEntries {
  private count = 0;
  private open = 0;
  private quiet: { checkpointId: string; count: number } | null = null;

  /** Counts an entry; returns what ends it (a call answered, a stream closed). */
  enter(): () => void {
    this.count++;
    this.open++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.open--;
    };
  }

  /** The entries counted so far when none is under way (taken before a checkpoint's flush), else null. */
  mark(): number | null {
    return this.open === 0 ? this.count : null;
  }

  /**
   * Records that the checkpoint was taken while no process ran and nothing came in since `mark`
   * (read before its flush): nothing wrote the volume after it, until the next entry.
   */
  quietAfter(checkpointId: string, mark: number): void {
    if (this.open === 0 && this.count === mark) this.quiet = { checkpointId, count: mark };
  }

  /** The checkpoint since which nothing could have written the volume, or null. */
  quietSince(): string | null {
    return this.quiet && this.quiet.count === this.count ? this.quiet.checkpointId : null;
  }
}
