import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** What runs inside every sandbox (the agent and its helpers), built by `npm run build` into packages/agent/dist. */
export function sandboxRuntimeBuildDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.resolve(here, '../../agent/dist');
}
