// Bundles the in-sandbox daemon into one file that the node agent mounts read-only into every
// sandbox, compiles the two static helpers it needs (PID 1 reaper and PTY) and the compatibility
// library preloaded into sandbox programs, and the node agent's
// own host-side helper (the subreaper that runs runsc).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'packages/daemon/dist-sandbox');
mkdirSync(out, { recursive: true });

await build({
  entryPoints: [path.join(root, 'packages/daemon/src/main.ts')],
  bundle: true,
  platform: 'node',
  target: 'node18',
  format: 'esm',
  outfile: path.join(out, 'space-daemon.mjs'),
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  external: ['bufferutil', 'utf-8-validate'],
  logLevel: 'warning',
});

for (const helper of ['space-init', 'space-pty']) {
  execFileSync('gcc', ['-static', '-O2', '-Wall', '-o', path.join(out, helper), path.join(root, `packages/daemon/native/${helper}.c`)], { stdio: 'inherit' });
}
// Preloaded into the sandbox's programs (glibc templates): works around gaps of this gVisor release.
execFileSync('gcc', ['-shared', '-fPIC', '-O2', '-Wall', '-o', path.join(out, 'space-compat.so'), path.join(root, 'packages/daemon/native/space-compat.c')], {
  stdio: 'inherit',
});

const nodeNative = path.join(root, 'packages/node/dist-native');
mkdirSync(nodeNative, { recursive: true });
execFileSync('gcc', ['-static', '-O2', '-Wall', '-o', path.join(nodeNative, 'space-shim'), path.join(root, 'packages/node/native/space-shim.c')], {
  stdio: 'inherit',
});
