// Builds the web console's browser bundle (packages/console/app) into packages/console/dist-app:
// one JavaScript file and one stylesheet (xterm's included), and the page. Everything is served by
// the control plane under /console; nothing is loaded from elsewhere. Its types are checked first.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const app = path.join(root, 'packages/console/app');
const out = path.join(root, 'packages/console/dist-app');
mkdirSync(out, { recursive: true });
// esbuild only strips types: they are checked first (browser lib, Preact's JSX).
execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', app], { stdio: 'inherit' });
await build({
  entryPoints: { app: path.join(app, 'main.tsx') },
  bundle: true,
  outdir: out,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: false,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
});
copyFileSync(path.join(app, 'index.html'), path.join(out, 'index.html'));
