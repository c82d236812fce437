/**
 * Docker's `.dockerignore`: which paths of a build context are left out. One pattern per line
 * (`#` starts a comment), relative to the context, `/` between segments; `*` and `?` match within a
 * segment, `[...]` a class, `**` any number of segments; a line starting with `!` takes paths back
 * in. A path is left out when the last pattern that matches it, or one of the directories it is in,
 * is not a `!` one (as Docker's own matcher decides).
 */
/** A pattern's segment: an anchored expression, or `**` (any number of segments). */
type Segment = RegExp | '**';

export interface IgnoreRules {
  patterns: { negate: boolean; segments: Segment[] }[];
  /** Whether some pattern takes paths back in: an ignored directory must still be walked then. */
  hasExceptions: boolean;
}

function segmentExpression(segment: string): Segment {
  if (segment === '**') return segment;
  let source = '';
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else if (c === '\\' && i + 1 < segment.length) source += escapeRegExp(segment[++i]!);
    else if (c === '[') {
      const end = segment.indexOf(']', i + 2);
      if (end === -1) source += '\\[';
      else {
        const body = segment
          .slice(i + 1, end)
          .replace(/^[!^]/, '^')
          .replace(/\\/g, '\\\\');
        source += `[${body}]`;
        i = end;
      }
    } else source += escapeRegExp(c);
  }
  return new RegExp(`^${source}$`);
}

function escapeRegExp(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

export function parseDockerignore(text: string): IgnoreRules {
  const patterns: IgnoreRules['patterns'] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    if (negate) line = line.slice(1).trim();
    const segments = line
      .split('/')
      .filter((s) => s !== '' && s !== '.')
      .map(segmentExpression);
    if (segments.length > 0) patterns.push({ negate, segments });
  }
  return { patterns, hasExceptions: patterns.some((p) => p.negate) };
}

/** Whether the segments of a path match a pattern's, `**` standing for any number of them. */
function matches(pattern: Segment[], path: string[], p = 0, n = 0): boolean {
  if (p === pattern.length) return n === path.length;
  const segment = pattern[p]!;
  if (segment === '**') {
    for (let skip = n; skip <= path.length; skip++) if (matches(pattern, path, p + 1, skip)) return true;
    return false;
  }
  return n < path.length && segment.test(path[n]!) && matches(pattern, path, p + 1, n + 1);
}

/** Whether `relativePath` (a file or a directory, `/`-separated) is left out of the context. */
export function isIgnored(rules: IgnoreRules, relativePath: string): boolean {
  const path = relativePath.split('/');
  let ignored = false;
  for (const { negate, segments } of rules.patterns) {
    // The path itself or a directory it is in.
    for (let depth = 1; depth <= path.length; depth++) {
      if (matches(segments, path.slice(0, depth))) {
        ignored = !negate;
        break;
      }
    }
  }
  return ignored;
}
