import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { isIgnored, parseDockerignore } from './dockerignore.js';

/** How many of the biggest top-level entries a too-big context's error names. */
const namedInError = 3;

const megabytes = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/**
 * A Dockerfile build's context: every file under `dir` that its `.dockerignore` (Docker's syntax)
 * does not leave out (nor `.git`), by relative path, and which are executable. A context over
 * `maxBytes` is refused before anything is read, naming what made it big.
 */
export function readBuildContext(dir: string, maxBytes: number): { files: Record<string, Buffer>; executables: string[] } {
  const ignoreFile = path.join(dir, '.dockerignore');
  // `.git` is left out unless the file takes it back (`!.git`).
  const rules = parseDockerignore(`.git\n${existsSync(ignoreFile) ? readFileSync(ignoreFile, 'utf8') : ''}`);
  const found: { name: string; size: number; executable: boolean }[] = [];
  const walk = (relative: string): void => {
    for (const entry of readdirSync(path.join(dir, relative), { withFileTypes: true })) {
      const name = relative ? `${relative}/${entry.name}` : entry.name;
      const ignored = isIgnored(rules, name);
      if (entry.isDirectory()) {
        // An ignored directory is walked only when an exception may take something in it back.
        if (!ignored || rules.hasExceptions) walk(name);
      } else if (entry.isFile() && !ignored) {
        const stat = statSync(path.join(dir, name));
        found.push({ name, size: stat.size, executable: (stat.mode & 0o111) !== 0 });
      }
    }
  };
  walk('');
  const total = found.reduce((sum, f) => sum + f.size, 0);
  if (total > maxBytes) {
    const byTop = new Map<string, number>();
    for (const f of found) {
      const top = f.name.split('/')[0]!;
      byTop.set(top, (byTop.get(top) ?? 0) + f.size);
    }
    const biggest = [...byTop].sort((a, b) => b[1] - a[1]).slice(0, namedInError);
    throw new Error(
      `the build context ${dir} holds ${megabytes(total)}, more than ${megabytes(maxBytes)}: ${biggest.map(([n, s]) => `${n} ${megabytes(s)}`).join(', ')}; ` +
        `leave out what the Dockerfile does not copy in ${ignoreFile} (Docker's syntax)`,
    );
  }
  const files: Record<string, Buffer> = {};
  for (const f of found) files[f.name] = readFileSync(path.join(dir, f.name));
  return { files, executables: found.filter((f) => f.executable).map((f) => f.name) };
}
