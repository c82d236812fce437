import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDockerfile, substitute } from './dockerfile.js';

test('a Dockerfile with every supported instruction: continuations, comments, both forms', () => {
  const steps = parseDockerfile(
    [
      'ARG BASE=base',
      'FROM base AS build',
      '# a comment',
      'ENV A=1 B="two words" C=x\\ y',
      'ENV OLD legacy form',
      'ARG VERSION=1.0',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Dockerfile text, not a template literal
      'LABEL org.example.v="${VERSION}" team=agents',
      'WORKDIR /app',
      'USER dev:dev',
      'RUN apt-get update && \\',
      '    # skipped inside the continuation',
      '    echo done',
      'RUN ["python3", "-c", "print(1)"]',
      'COPY --chown=dev:dev src/ lib/a.txt /app/',
      'ADD ["bundle.tar.gz", "/opt/"]',
      'EXPOSE 8000 9000/tcp',
      'ENTRYPOINT ["python3"]',
      'CMD server.py --port 8000',
    ].join('\n'),
  );
  assert.deepEqual(
    steps.map((s) => `${s.line}:${s.kind}`),
    [
      '1:ARG',
      '2:FROM',
      '4:ENV',
      '5:ENV',
      '6:ARG',
      '7:LABEL',
      '8:WORKDIR',
      '9:USER',
      '10:RUN',
      '13:RUN',
      '14:COPY',
      '15:ADD',
      '16:EXPOSE',
      '17:ENTRYPOINT',
      '18:CMD',
    ],
  );
  const byLine = new Map(steps.map((s) => [s.line, s]));
  assert.deepEqual((byLine.get(4) as { pairs: unknown }).pairs, [
    ['A', '1'],
    ['B', 'two words'],
    ['C', 'x y'],
  ]);
  assert.deepEqual((byLine.get(5) as { pairs: unknown }).pairs, [['OLD', 'legacy form']]);
  assert.equal((byLine.get(10) as { command: unknown }).command, 'apt-get update &&   echo done');
  assert.deepEqual((byLine.get(13) as { command: unknown }).command, ['python3', '-c', 'print(1)']);
  assert.deepEqual(byLine.get(14), {
    line: 14,
    text: 'COPY --chown=dev:dev src/ lib/a.txt /app/',
    kind: 'COPY',
    sources: ['src/', 'lib/a.txt'],
    dest: '/app/',
    chown: 'dev:dev',
  });
  assert.deepEqual((byLine.get(15) as { sources: unknown }).sources, ['bundle.tar.gz']);
});

test('what a Dockerfile may not do is refused with its line number', () => {
  const refused = (text: string, pattern: RegExp) => assert.throws(() => parseDockerfile(text), pattern, text);
  refused('FROM base\nHEALTHCHECK CMD true', /line 2: HEALTHCHECK is not supported/);
  refused('RUN true', /line 1: a Dockerfile starts FROM/);
  refused('ENV A=1\nFROM base', /line 1: only ARG may come before FROM/);
  refused('FROM base\nFROM tiny', /line 2: multi-stage/);
  refused('FROM base\nCOPY --from=build /a /b', /line 2: COPY --from is not supported/);
  refused('FROM base\nADD https://example.com/x.tgz /x', /line 2: ADD from a URL/);
  refused('FROM base\nCOPY onlyone', /line 2: COPY takes one or more sources/);
  refused('FROM base\nRUN ["unterminated"', /line 2: .* is not a JSON array/);
  refused('FROM base\nENV A="open', /line 2: unterminated " quote/);
  refused('FROM base\nENV 1A=x', /line 2: "1A" is not a variable name/);
  refused('FROM base\nEXPOSE eighty', /line 2: EXPOSE takes ports/);
  refused('FROM base\nRUN', /line 2: RUN needs arguments/);
  refused('# nothing\n\n', /line 1: the Dockerfile has no instructions/);
  refused('FROM --platform=linux/arm64 base', /line 1: FROM flags/);
});

test('variables are substituted as Docker does outside RUN', () => {
  const vars = { HOME: '/home/dev', EMPTY: '' };
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Dockerfile variables, not a template literal
  assert.equal(substitute('$HOME/app ${HOME}/x ${MISSING:-fallback} ${EMPTY:-e} $MISSING. \\$HOME', vars), '/home/dev/app /home/dev/x fallback e . $HOME');
});

test('adversarial Dockerfiles under the 256 KiB limit parse in linear time (the probe: 17 s for continuation lines)', () => {
  const size = 250 * 1024;
  const inputs = {
    continuations: `FROM base\nRUN ${'\\\n'.repeat(size / 2)}true`,
    'blank continuations': `FROM base\nRUN x \\${'\n \\'.repeat(size / 3)}\ntrue`,
    'comments in a continuation': `FROM base\nRUN x \\\n${'#\n'.repeat(size / 2)}true`,
    'one long line': `FROM base\nRUN ${'a '.repeat(size / 2)}`,
    'trailing blanks': `FROM base\nRUN \\${' '.repeat(size)}x`,
    'many chown flags': `FROM base\nCOPY ${'--chown=a '.repeat(size / 10)}a /b`,
    'quotes and escapes': `FROM base\nENV A="${'\\"'.repeat(size / 2)}"`,
    'many variables': `FROM base\nENV ${'A=1 '.repeat(size / 4)}`,
    slashes: `FROM base\nCOPY a${'/'.repeat(size)} /b`,
  };
  for (const [name, text] of Object.entries(inputs)) {
    const started = performance.now();
    try {
      parseDockerfile(text);
    } catch {
      // refused is fine: what is measured is how long it takes to decide
    }
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 250, `${name}: ${elapsed.toFixed(1)} ms`);
  }
});
