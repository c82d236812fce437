/** Lines of context around each change, as `diff -u` shows them. */
const contextLines = 3;

/**
 * The edits that turn `a` into `b` (lines), by Myers' O((N+M)D) algorithm, as a list of
 * `[op, line]` with op ' ' (kept), '-' or '+'; null when more than `maxEdits` are needed (the
 * caller says the files differ too much to show).
 */
export function lineEdits(a: string[], b: string[], maxEdits: number): [' ' | '-' | '+', string][] | null {
  const n = a.length;
  const m = b.length;
  const offset = maxEdits + 1;
  const v = new Int32Array(2 * offset + 1);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= maxEdits; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, offset, d);
    }
  }
  return null;
}

/** Walks the recorded frontiers back from the end to the start, then reads the edits forwards. */
function backtrack(a: string[], b: string[], trace: Int32Array[], offset: number, last: number): [' ' | '-' | '+', string][] {
  const edits: [' ' | '-' | '+', string][] = [];
  let x = a.length;
  let y = b.length;
  for (let d = last; d > 0; d--) {
    const v = trace[d]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? k + 1 : k - 1;
    const prevX = v[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) edits.push([' ', a[--x]!]), y--;
    if (x === prevX) edits.push(['+', b[--y]!]);
    else edits.push(['-', a[--x]!]);
  }
  while (x > 0 && y > 0) edits.push([' ', a[--x]!]), y--;
  return edits.reverse();
}

/** The most lines (both texts together) a diff is worked out for: the work grows with lines times edits. */
export const maxDiffLines = 50_000;

/** A unified diff (`--- a/path`, `+++ b/path`, hunks with 3 lines of context) of two texts; '' when they are the same; null past the bounds. */
export function unifiedDiff(path: string, before: string, after: string, maxEdits: number): string | null {
  const a = splitLines(before);
  const b = splitLines(after);
  if (a.length + b.length > maxDiffLines) return null;
  const edits = lineEdits(a, b, maxEdits);
  if (!edits) return null;
  const changed = edits.map((e, i) => (e[0] === ' ' ? -1 : i)).filter((i) => i >= 0);
  if (changed.length === 0) return '';
  const out = [`--- a${path}`, `+++ b${path}`];
  // Hunks: runs of changes whose context overlaps, each with its line numbers in both files.
  let start = 0;
  while (start < changed.length) {
    let end = start;
    while (end + 1 < changed.length && changed[end + 1]! - changed[end]! <= 2 * contextLines) end++;
    const from = Math.max(0, changed[start]! - contextLines);
    const to = Math.min(edits.length - 1, changed[end]! + contextLines);
    let lineA = 1;
    let lineB = 1;
    for (const [op] of edits.slice(0, from)) {
      if (op !== '+') lineA++;
      if (op !== '-') lineB++;
    }
    const hunk = edits.slice(from, to + 1);
    const countA = hunk.filter(([op]) => op !== '+').length;
    const countB = hunk.filter(([op]) => op !== '-').length;
    out.push(`@@ -${range(lineA, countA)} +${range(lineB, countB)} @@`);
    for (const [op, line] of hunk) out.push(op + line);
    start = end + 1;
  }
  return `${out.join('\n')}\n`;
}

/** A hunk's range as `diff -u` writes it: `start,count`, the count left out when 1, and an empty range at the line before. */
function range(start: number, count: number): string {
  if (count === 1) return String(start);
  return `${count === 0 ? start - 1 : start},${count}`;
}

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}
