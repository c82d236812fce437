import { ErrorCode, SpaceError } from '@space/protocol';

/** One instruction of a Dockerfile, with the line it starts on. */
export type DockerfileStep = { line: number; text: string } & (
  | { kind: 'FROM'; image: string }
  | { kind: 'RUN'; command: string[] | string }
  | { kind: 'COPY' | 'ADD'; sources: string[]; dest: string; chown: string | null }
  | { kind: 'ENV'; pairs: [string, string][] }
  | { kind: 'ARG'; name: string; defaultValue: string | null }
  | { kind: 'LABEL'; pairs: [string, string][] }
  | { kind: 'WORKDIR'; path: string }
  | { kind: 'USER'; user: string }
  | { kind: 'EXPOSE'; ports: string[] }
  | { kind: 'CMD' | 'ENTRYPOINT'; command: string[] | string }
);

const supported = ['FROM', 'RUN', 'COPY', 'ADD', 'ENV', 'ARG', 'LABEL', 'WORKDIR', 'USER', 'EXPOSE', 'CMD', 'ENTRYPOINT'];

function fail(line: number, message: string): never {
  throw new SpaceError(ErrorCode.VALIDATION_FAILED, `Dockerfile line ${line}: ${message}`);
}

function isBlankOrComment(line: string): boolean {
  const text = line.trimStart();
  return text === '' || text.startsWith('#');
}

/** A line without its ending `\` (blanks after it allowed), and whether it had one: then the instruction goes on. */
function splitContinuation(line: string): { text: string; goesOn: boolean } {
  const end = line.trimEnd();
  return end.endsWith('\\') ? { text: end.slice(0, -1), goesOn: true } : { text: line, goesOn: false };
}

/** The instructions of a Dockerfile: continuation lines joined, comments dropped, each checked. */
export function parseDockerfile(text: string): DockerfileStep[] {
  const steps: DockerfileStep[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const first = i + 1;
    if (isBlankOrComment(lines[i]!)) continue;
    // Parts are collected and joined once: appending to one string and testing its end again per
    // line was quadratic in the number of continuation lines (17 s for 256 KiB of them).
    const start = splitContinuation(lines[i]!);
    const parts = [start.text];
    let goesOn = start.goesOn;
    while (goesOn && i + 1 < lines.length) {
      const line = lines[++i]!;
      // Comment and empty lines inside a continued instruction are left out, as Docker does: it goes
      // on. Each stands for one blank, as it always has (a step's text is part of its cache key).
      if (isBlankOrComment(line)) {
        parts.push('');
        continue;
      }
      const next = splitContinuation(line.trim());
      parts.push(next.text);
      goesOn = next.goesOn;
    }
    const joined = parts.join(' ');
    const match = /^\s*([A-Za-z]+)(?:\s+([\s\S]*))?$/.exec(joined);
    if (!match) fail(first, `cannot read ${JSON.stringify(joined.trim().slice(0, 80))}`);
    const kind = match[1]!.toUpperCase();
    const args = (match[2] ?? '').trim();
    if (!supported.includes(kind)) fail(first, `${kind} is not supported (supported: ${supported.join(', ')})`);
    if (!args) fail(first, `${kind} needs arguments`);
    steps.push(parseInstruction(kind, args, first, joined.trim()));
  }
  if (steps.length === 0) fail(1, 'the Dockerfile has no instructions');
  const from = steps.findIndex((s) => s.kind === 'FROM');
  if (from === -1) fail(steps[0]!.line, 'a Dockerfile starts FROM a template');
  const before = steps.slice(0, from).find((s) => s.kind !== 'ARG');
  if (before) fail(before.line, `only ARG may come before FROM, not ${before.kind}`);
  const second = steps.slice(from + 1).find((s) => s.kind === 'FROM');
  if (second) fail(second.line, 'multi-stage builds (a second FROM) are not supported');
  return steps;
}

function parseInstruction(kind: string, args: string, line: number, text: string): DockerfileStep {
  const base = { line, text };
  switch (kind) {
    case 'FROM': {
      if (args.startsWith('--')) fail(line, `FROM flags (${args.split(/\s/)[0]}) are not supported`);
      const words = args.split(/\s+/);
      if (words.length !== 1 && !(words.length === 3 && words[1]!.toUpperCase() === 'AS')) fail(line, 'FROM takes one template name (and AS alias)');
      return { ...base, kind: 'FROM', image: words[0]! };
    }
    case 'RUN':
    case 'CMD':
    case 'ENTRYPOINT': {
      if (args.startsWith('--')) fail(line, `${kind} flags (${args.split(/\s/)[0]}) are not supported`);
      return { ...base, kind, command: execOrShellForm(args, line) } as DockerfileStep;
    }
    case 'COPY':
    case 'ADD': {
      let rest = args;
      let chown: string | null = null;
      for (let flag = /^--([a-z-]+)(?:=(\S+))?\s+/.exec(rest); flag; flag = /^--([a-z-]+)(?:=(\S+))?\s+/.exec(rest)) {
        if (flag[1] !== 'chown' || !flag[2]) fail(line, `${kind} --${flag[1]} is not supported (only --chown=USER[:GROUP])`);
        chown = flag[2];
        rest = rest.slice(flag[0].length);
      }
      const words = rest.startsWith('[') ? jsonArray(rest, line) : splitWords(rest, line);
      if (words.length < 2) fail(line, `${kind} takes one or more sources and a destination`);
      for (const source of words.slice(0, -1))
        if (/^[a-z]+:\/\//i.test(source)) fail(line, `${kind} from a URL (${source}) is not supported: put the file in the build context`);
      return { ...base, kind, sources: words.slice(0, -1), dest: words.at(-1)!, chown };
    }
    case 'ENV':
    case 'LABEL': {
      const words = splitWords(args, line);
      // The old form `ENV KEY value with spaces`.
      if (kind === 'ENV' && !words[0]!.includes('=')) {
        const [key, ...value] = args.split(/\s+/);
        if (value.length === 0) fail(line, 'ENV needs a value');
        return { ...base, kind, pairs: [[checkedName(key!, line), value.join(' ')]] };
      }
      const pairs = words.map((word): [string, string] => {
        const at = word.indexOf('=');
        if (at <= 0) fail(line, `${kind} takes KEY=VALUE pairs, not ${JSON.stringify(word)}`);
        return [kind === 'ENV' ? checkedName(word.slice(0, at), line) : word.slice(0, at), word.slice(at + 1)];
      });
      return { ...base, kind, pairs } as DockerfileStep;
    }
    case 'ARG': {
      const words = splitWords(args, line);
      if (words.length !== 1) fail(line, 'ARG takes one NAME or NAME=default');
      const at = words[0]!.indexOf('=');
      return {
        ...base,
        kind: 'ARG',
        name: checkedName(at === -1 ? words[0]! : words[0]!.slice(0, at), line),
        defaultValue: at === -1 ? null : words[0]!.slice(at + 1),
      };
    }
    case 'WORKDIR':
      return { ...base, kind: 'WORKDIR', path: args };
    case 'USER':
      if (/\s/.test(args)) fail(line, 'USER takes one name (or uid), with an optional :group');
      return { ...base, kind: 'USER', user: args };
    default: {
      const ports = args.split(/\s+/);
      for (const port of ports) if (!/^(\d{1,5}|\$\{?\w+\}?)(\/(tcp|udp))?$/.test(port)) fail(line, `EXPOSE takes ports, not ${JSON.stringify(port)}`);
      return { ...base, kind: 'EXPOSE', ports };
    }
  }
}

function checkedName(name: string, line: number): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) fail(line, `${JSON.stringify(name)} is not a variable name`);
  return name;
}

/** `["a", "b"]` is the exec form (argv); anything else the shell form (run by /bin/sh -c). */
function execOrShellForm(args: string, line: number): string[] | string {
  return args.startsWith('[') ? jsonArray(args, line) : args;
}

function jsonArray(args: string, line: number): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    fail(line, `${args.slice(0, 60)} is not a JSON array of strings`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || !parsed.every((a) => typeof a === 'string'))
    fail(line, 'the exec form is a non-empty JSON array of strings');
  return parsed as string[];
}

/** `\s` without a regular expression per character (which made a 200 KB word take 20-90 ms). */
function isBlank(c: string): boolean {
  return c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v' || (c > '\x7f' && /\s/.test(c));
}

/**
 * Words separated by blanks, with "double" and 'single' quotes and backslash escapes, as ENV and
 * LABEL take them. Runs of plain characters are taken as slices (one string per character was
 * slow on a 200 KB word).
 */
function splitWords(args: string, line: number): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | null = null;
  let i = 0;
  while (i < args.length) {
    const c = args[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < args.length) word += args[++i];
      else word += c;
      i++;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
      i++;
    } else if (c === '\\' && i + 1 < args.length) {
      word += args[i + 1];
      inWord = true;
      i += 2;
    } else if (isBlank(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      i++;
    } else {
      let end = i + 1;
      while (end < args.length && !isSpecial(args[end]!)) end++;
      word += args.slice(i, end);
      inWord = true;
      i = end;
    }
  }
  if (quote) fail(line, `unterminated ${quote} quote`);
  if (inWord) words.push(word);
  return words;
}

function isSpecial(c: string): boolean {
  return c === '"' || c === "'" || c === '\\' || isBlank(c);
}

/** `$NAME`, `${NAME}` and `${NAME:-default}` replaced from `vars` (unknown ones by the empty string), as Docker does outside RUN. */
export function substitute(text: string, vars: Record<string, string>): string {
  return text.replace(/\\\$|\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)/g, (all, braced?: string, fallback?: string, bare?: string) => {
    if (all === '\\$') return '$';
    const value = vars[braced ?? bare!];
    return value !== undefined && value !== '' ? value : (fallback ?? '');
  });
}
