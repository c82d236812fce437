import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { NodeJoinReplySchema } from '@space/protocol';
import type { Logger } from './logger.js';

export interface NodeCredentialOptions {
  /** Where the credential is kept once issued: `<data>/node/credential`, readable by root only. */
  file: string;
  nodeId: string;
  controlPlanes: string[];
  /** The one-time join token (`SPACE_NODE_JOIN_TOKEN`), traded for the credential at the first start. */
  joinToken: string | null;
  /** How long to keep asking control planes that do not answer yet. */
  waitMs: number;
  log: Logger;
}

/**
 * The node's own credential for its heartbeats: the one kept in its data dir, else one issued now
 * for the join token by the first control plane that answers (and kept). Null without either: the
 * caller falls back to the admin key.
 */
export async function nodeCredential(options: NodeCredentialOptions): Promise<string | null> {
  if (existsSync(options.file)) return (await readFile(options.file, 'utf8')).trim();
  if (!options.joinToken) return null;
  const body = JSON.stringify({ nodeId: options.nodeId, joinToken: options.joinToken });
  // The control planes may still be starting: asked again for a while, as heartbeats would be.
  const deadline = Date.now() + options.waitMs;
  for (let pass = 0; ; pass++) {
    const refusals: string[] = [];
    for (const url of options.controlPlanes) {
      const answer = await ask(url, body).catch((err: Error) => ({ status: 0, text: err.message }));
      if (answer.status === 201) {
        const reply = NodeJoinReplySchema.parse(JSON.parse(answer.text));
        await keep(options.file, reply.credential);
        options.log.info(`joined the cluster as node ${reply.nodeId}; its credential is in ${options.file}`);
        return reply.credential;
      }
      // A refusal of the token is the same at every control plane (they share the store): said at once.
      if (answer.status === 401 || answer.status === 400) throw new Error(`cannot join the cluster with SPACE_NODE_JOIN_TOKEN: ${errorMessage(answer.text)}`);
      refusals.push(`${url}: ${answer.status || 'no answer'} ${answer.text.slice(0, 300)}`);
    }
    if (Date.now() >= deadline) throw new Error(`cannot join the cluster: no control plane answered (${refusals.join('; ')})`);
    if (pass === 0) options.log.warn(`joining the cluster: no control plane answered yet (${refusals.join('; ')}); trying again`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function ask(url: string, body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url.replace(/\/$/, '')}/v1/nodes/join`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, text: await res.text() };
}

/** Written whole or not at all (a start interrupted mid-write must not leave half a credential). */
async function keep(file: string, credential: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const partial = `${file}.partial`;
  await writeFile(partial, `${credential}\n`, { mode: 0o600 });
  await rename(partial, file);
}

function errorMessage(text: string): string {
  try {
    return String((JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text);
  } catch {
    return text.slice(0, 300);
  }
}
