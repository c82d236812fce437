import { Transform, type TransformCallback } from 'node:stream';

interface Pattern {
  name: string;
  from: Buffer;
  to: Buffer;
}

/** One substitution: `from` becomes `to` wherever it appears; `name` is the secret it belongs to. */
export interface Substitution {
  name: string;
  from: string;
  to: string;
}

/**
 * Replaces secrets' placeholders by their values (on the way out) or values by placeholders (in
 * responses), in strings and in byte streams. Records which secrets it replaced, for the audit log.
 */
export class SecretRewriter {
  readonly used = new Set<string>();
  private readonly patterns: Pattern[];
  private readonly longest: number;

  constructor(private readonly substitutions: Substitution[]) {
    this.patterns = substitutions.filter((s) => s.from.length > 0).map((s) => ({ name: s.name, from: Buffer.from(s.from), to: Buffer.from(s.to) }));
    this.longest = Math.max(0, ...this.patterns.map((p) => p.from.length));
  }

  get empty(): boolean {
    return this.patterns.length === 0;
  }

  rewrite(text: string): string {
    let out = text;
    for (const s of this.substitutions) {
      if (s.from && out.includes(s.from)) {
        out = out.split(s.from).join(s.to);
        this.used.add(s.name);
      }
    }
    return out;
  }

  /** Rewrites every header value; names stay as they are. */
  rewriteHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (value === undefined) continue;
      out[name] = Array.isArray(value) ? value.map((v) => this.rewrite(v)) : this.rewrite(value);
    }
    return out;
  }

  rewriteBuffer(data: Buffer): Buffer {
    return this.scan(data, true).output;
  }

  /** A stream that rewrites bytes as they pass, also across chunk boundaries. */
  stream(): Transform {
    let carry: Buffer = Buffer.alloc(0);
    return new Transform({
      transform: (chunk: Buffer, _encoding, callback: TransformCallback) => {
        const { output, rest } = this.scan(carry.length ? Buffer.concat([carry, chunk]) : chunk, false);
        carry = rest;
        callback(null, output);
      },
      flush: (callback: TransformCallback) => callback(null, carry),
    });
  }

  /**
   * Replaces all complete matches in `data`. Unless `final`, the last `longest - 1` bytes after the
   * last match are held back: a pattern may start there and end in the next chunk.
   */
  private scan(data: Buffer, final: boolean): { output: Buffer; rest: Buffer } {
    const parts: Buffer[] = [];
    let pos = 0;
    for (;;) {
      let best: { index: number; pattern: Pattern } | null = null;
      for (const pattern of this.patterns) {
        const index = data.indexOf(pattern.from, pos);
        if (index >= 0 && (!best || index < best.index || (index === best.index && pattern.from.length > best.pattern.from.length))) best = { index, pattern };
      }
      if (!best) break;
      parts.push(data.subarray(pos, best.index), best.pattern.to);
      this.used.add(best.pattern.name);
      pos = best.index + best.pattern.from.length;
    }
    const keep = final ? 0 : Math.max(0, this.longest - 1);
    const safeEnd = Math.max(pos, data.length - keep);
    parts.push(data.subarray(pos, safeEnd));
    return { output: parts.length === 1 ? parts[0]! : Buffer.concat(parts), rest: Buffer.from(data.subarray(safeEnd)) };
  }
}
