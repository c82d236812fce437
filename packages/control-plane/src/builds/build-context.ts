import { createHash } from 'node:crypto';
import path from 'node:path';
import { ErrorCode, SpaceError } from '@space/protocol';
import { type DockerfileStep, substitute } from './dockerfile.js';
import { globMatches, WorkBudget } from './glob-match.js';

type CopyStep = Extract<DockerfileStep, { kind: 'COPY' | 'ADD' }>;

/** A file a COPY or ADD puts into the template. */
export interface ContextCopy {
  /** Its path in the build context. */
  source: string;
  /** Where it goes in the sandbox (absolute). */
  target: string;
  data: Buffer;
  executable: boolean;
}

/** Steps of source matching one build may take (each context file visited, each glob comparison). */
const matchingBudget = 20_000_000;

type Match = { path: string; relative: string };

/**
 * A build's context: the files the request carried (decoded and bounded in size), and which of them
 * each COPY or ADD source names: a file, a directory (its files, under it), `.` (everything), or a
 * `*`/`?` pattern. Nothing outside the context can be named.
 */
export class BuildContext {
  /** The context's paths, sorted once. */
  private readonly names: string[];
  /** What each source named, matched once per build: `check`, `copies` and `digest` all ask. */
  private readonly matched = new Map<string, Match[]>();
  private readonly budget = new WorkBudget(matchingBudget, "the Dockerfile's COPY and ADD sources");

  private constructor(
    private readonly files: Map<string, Buffer>,
    private readonly executables: Set<string>,
  ) {
    this.names = [...files.keys()].sort();
  }

  static from(encoded: Record<string, string>, executables: string[], maxBytes: number): BuildContext {
    const files = new Map<string, Buffer>();
    let total = 0;
    for (const [name, base64] of Object.entries(encoded)) {
      const data = Buffer.from(base64, 'base64');
      total += data.length;
      if (total > maxBytes)
        throw new SpaceError(
          ErrorCode.PAYLOAD_TOO_LARGE,
          `the build context holds more than ${Math.round(maxBytes / 1024 / 1024)} MB (SPACE_TEMPLATE_MAX_CONTEXT_MB); leave out what the Dockerfile does not copy`,
        );
      files.set(name, data);
    }
    return new BuildContext(files, new Set(executables));
  }

  /** Refuses (with the Dockerfile line) a source outside the context or naming nothing in it; sources with variables are checked when they run. */
  check(step: CopyStep): void {
    for (const source of step.sources) {
      if (hasParentSegment(source) || source.startsWith('/'))
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, `Dockerfile line ${step.line}: ${step.kind} source ${source} is outside the build context`);
      if (!source.includes('$') && this.matches(source).length === 0)
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, `Dockerfile line ${step.line}: ${step.kind} source ${source} is not in the build context`);
    }
  }

  /** Every file the step copies and where it goes, for the build's `workdir` and variables. */
  copies(step: CopyStep, workdir: string, vars: Record<string, string>): ContextCopy[] {
    const dest = substitute(step.dest, vars);
    const absolute = path.posix.resolve(workdir, dest);
    const copies: ContextCopy[] = [];
    for (const raw of step.sources) {
      const source = substitute(raw, vars);
      const matched = hasParentSegment(source) ? [] : this.matches(source);
      if (matched.length === 0) throw new Error(`${step.kind} source ${source} is not in the build context`);
      // One plain file to a destination not ending in "/": the destination is the file's new name.
      const single =
        step.sources.length === 1 &&
        matched.length === 1 &&
        matched[0]!.relative === path.posix.basename(matched[0]!.path) &&
        !dest.endsWith('/') &&
        !/[*?]/.test(source) &&
        this.files.has(normalize(source));
      for (const { path: name, relative } of matched)
        copies.push({
          source: name,
          target: single ? absolute : path.posix.join(absolute, relative),
          data: this.files.get(name)!,
          executable: this.executables.has(name),
        });
    }
    return copies;
  }

  /** What the step's result depends on in the context: the files it copies, their modes and targets. */
  digest(step: CopyStep, state: { workdir: string; env: Record<string, string>; args: Record<string, string> }): string {
    const h = createHash('sha256');
    const copies = (() => {
      try {
        return this.copies(step, state.workdir, { ...state.args, ...state.env });
      } catch {
        return [];
      }
    })();
    for (const copy of copies)
      h.update(copy.target)
        .update('\0')
        .update(copy.executable ? 'x' : '-')
        .update(createHash('sha256').update(copy.data).digest());
    return h.digest('hex');
  }

  /** The files a source names; tenant input, so bounded by the build's matching budget. */
  private matches(source: string): Match[] {
    const wanted = normalize(source);
    let found = this.matched.get(wanted);
    if (!found) {
      found = this.find(wanted);
      this.matched.set(wanted, found);
    }
    return found;
  }

  private find(wanted: string): Match[] {
    if (wanted === '') return this.names.map((name) => ({ path: name, relative: name }));
    if (/[*?]/.test(wanted)) {
      this.budget.spend(this.names.length);
      return this.names.filter((name) => globMatches(wanted, name, this.budget)).map((name) => ({ path: name, relative: path.posix.basename(name) }));
    }
    if (this.files.has(wanted)) return [{ path: wanted, relative: path.posix.basename(wanted) }];
    this.budget.spend(this.names.length);
    const directory = `${wanted}/`;
    return this.names.filter((name) => name.startsWith(directory)).map((name) => ({ path: name, relative: name.slice(directory.length) }));
  }
}

/** Whether a `..` segment is in the path (without splitting it: a source may be 200 KB of slashes). */
function hasParentSegment(source: string): boolean {
  for (let at = source.indexOf('..'); at !== -1; at = source.indexOf('..', at + 1))
    if ((at === 0 || source[at - 1] === '/') && (at + 2 === source.length || source[at + 2] === '/')) return true;
  return false;
}

/** `./a/b/` as `a/b`; `.` and `./` as the empty string (the whole context). Loops, not regular expressions: `/\/+$/` is quadratic in V8. */
function normalize(source: string): string {
  let start = 0;
  while (source.startsWith('./', start)) start += 2;
  let end = source.length;
  while (end > start && source[end - 1] === '/') end--;
  const trimmed = source.slice(start, end);
  return trimmed === '.' ? '' : trimmed;
}
