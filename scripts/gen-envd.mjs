#!/usr/bin/env node
// Regenerates packages/e2b/src/gen from packages/e2b/proto (envd's Connect services) with buf and
// protoc-gen-es from the devDependencies. The output is committed: builds do not need it.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
execFileSync(path.join(root, 'node_modules/.bin/buf'), ['generate'], { cwd: path.join(root, 'packages/e2b'), stdio: 'inherit' });
