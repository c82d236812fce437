import type { Attempt, FuzzTarget } from './fuzz-types.js';
import type { Random } from './random.js';

/** A COPY source made to backtrack: stars and question marks around the letter every context file is made of. */
function adversarialGlob(rng: Random): string {
  const parts = Array.from({ length: rng.int(1, 40) }, () => rng.pick(['*', '*', '?', 'a', 'a', 'aa', '**', '/']));
  return `${parts.join('')}${rng.pick(['b', 'a', '', '*b'])}`;
}

/**
 * Dockerfiles and build contexts shaped to make a parser or matcher work hard: thousands of
 * continuation lines, backtracking globs over files of one repeated letter, many sources, long
 * quoted words, runs of slashes and flags. Each is answered (refused or accepted as a build that
 * fails at its `FROM`) without a 5xx; the fuzzer's /healthz probe says whether it stalled anyone.
 */
export function dockerfileCall(target: FuzzTarget, rng: Random): Attempt {
  const shapes: (() => string)[] = [
    () => `RUN ${'\\\n'.repeat(rng.int(1000, 100_000))}true`,
    () => `RUN x \\\n${`${rng.pick(['#', '', ' '])}\n`.repeat(rng.int(1000, 60_000))}true`,
    () => `COPY ${Array.from({ length: rng.int(1, 200) }, () => adversarialGlob(rng)).join(' ')} /dest/`,
    () => `COPY ${'--chown=a '.repeat(rng.int(100, 10_000))}a /b`,
    () => `COPY a${'/'.repeat(rng.int(1000, 200_000))} /b`,
    () => `ENV A="${'\\"'.repeat(rng.int(100, 100_000))}"`,
    () => `LABEL ${'k=v '.repeat(rng.int(100, 50_000))}`,
    () => `${'COPY * /x/\n'.repeat(rng.int(10, 5000))}`,
  ];
  const dockerfile = `FROM no-such-template\n${rng.pick(shapes)()}\n`.slice(0, 256 * 1024);
  const files: Record<string, string> = {};
  const letters = rng.int(1, 250);
  for (let i = 0, n = rng.int(0, 2000); i < n; i++) files[`${'a'.repeat(letters)}${i}`] = 'eA==';
  const body = JSON.stringify({ name: `fuzz-df-${rng.int(0, 1e6)}`, dockerfile, files });
  return {
    description: `dockerfile ${JSON.stringify(dockerfile.slice(0, 160))} with ${Object.keys(files).length} files of ${letters} letters`,
    run: async () => {
      const res = await fetch(`${target.url}/v1/templates`, {
        method: 'POST',
        headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' },
        body,
      }).catch(() => null);
      if (!res) return { status: 0, reply: '' };
      return { status: res.status, reply: (await res.text().catch(() => '')).slice(0, 500) };
    },
  };
}
