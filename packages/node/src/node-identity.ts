import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { NodeJoinReplySchema } from '@space/protocol';
import type { Logger } from './logger.js';

const run = promisify(execFile);

export interface NodeIdentityOptions {
  /** Where what the node was issued is kept (`<data>/node`): `credential`, and `tls.crt`/`tls.key`/`ca.crt` with a cluster CA; root's only. */
  dir: string;
  nodeId: string;
  /** The names the control planes reach this node by (its node API URL's host), for its certificate. */
  hosts: string[];
  controlPlanes: string[];
  /** The one-time join token (`SPACE_NODE_JOIN_TOKEN`), traded for the credential at the first start. */
  joinToken: string | null;
  /** How long to keep asking control planes that do not answer yet. */
  waitMs: number;
  log: Logger;
}

/**
 * What a node that joined holds: the credential its heartbeats carry, and when the cluster has a CA
 * its node API's certificate and the CA itself, whose control plane certificates it takes as clients
 * (none for a node that joined before control planes had them).
 */
export interface NodeIdentity {
  credential: string;
  tls: { cert: string; key: string; clientCa?: string } | null;
}

/**
 * The node's own identity: the one kept in its data dir, else one issued now for the join token
 * by the first control plane that answers (and kept). The node makes its TLS key here and sends
 * only a certificate request: the key never leaves it. Null without a credential or a join token
 * (the caller falls back to the admin key).
 */
export async function nodeIdentity(options: NodeIdentityOptions): Promise<NodeIdentity | null> {
  const file = (name: string) => path.join(options.dir, name);
  if (existsSync(file('credential'))) return kept(options.dir);
  if (!options.joinToken) return null;
  await mkdir(options.dir, { recursive: true, mode: 0o700 });
  const csr = await certificateRequest(options.dir, options.nodeId);
  const body = JSON.stringify({ nodeId: options.nodeId, joinToken: options.joinToken, csr, hosts: options.hosts });
  // The control planes may still be starting: asked again for a while, as heartbeats would be.
  const deadline = Date.now() + options.waitMs;
  for (let pass = 0; ; pass++) {
    const refusals: string[] = [];
    for (const url of options.controlPlanes) {
      const answer = await ask(url, '/v1/nodes/join', body).catch((err: Error) => ({ status: 0, text: err.message }));
      if (answer.status === 201) {
        const reply = NodeJoinReplySchema.parse(JSON.parse(answer.text));
        if (reply.certificate) {
          if (reply.caCertificate) await keep(file('ca.crt'), reply.caCertificate);
          await keep(file('tls.crt'), reply.certificate);
          await rename(file('tls.key.new'), file('tls.key'));
        }
        await rm(file('tls.key.new'), { force: true });
        // Last: a node with a credential has joined, whatever else it holds.
        await keep(file('credential'), reply.credential);
        options.log.info(
          `joined the cluster as node ${reply.nodeId}; its credential is in ${file('credential')}${reply.certificate ? `, its node API's certificate (of the cluster CA) in ${file('tls.crt')}` : ''}`,
        );
        return kept(options.dir);
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

async function kept(dir: string): Promise<NodeIdentity> {
  await finishRenewal(dir);
  const read = (name: string) => readFile(path.join(dir, name), 'utf8');
  const clientCa = existsSync(path.join(dir, 'ca.crt')) ? { clientCa: await read('ca.crt') } : {};
  const tls = existsSync(path.join(dir, 'tls.crt')) ? { cert: await read('tls.crt'), key: await read('tls.key'), ...clientCa } : null;
  return { credential: (await read('credential')).trim(), tls };
}

/**
 * Puts a renewed certificate and its key in place (`tls.crt.new`, `tls.key.new`): the key first, so
 * that a stop between the two renames is finished at the next start (a `tls.crt.new` left means its
 * key is `tls.key.new` or, renamed already, `tls.key`).
 */
export async function finishRenewal(dir: string): Promise<void> {
  const file = (name: string) => path.join(dir, name);
  if (!existsSync(file('tls.crt.new'))) return;
  if (existsSync(file('tls.key.new'))) await rename(file('tls.key.new'), file('tls.key'));
  await rename(file('tls.crt.new'), file('tls.crt'));
}

/** A new P-256 key (`tls.key.new`, kept once a certificate comes for it) and a request for a certificate of it. */
export async function certificateRequest(dir: string, nodeId: string): Promise<string> {
  const key = path.join(dir, 'tls.key.new');
  // Made root's only before openssl writes the key into it.
  await writeFile(key, '', { mode: 0o600 });
  await run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
  const { stdout } = await run('openssl', ['req', '-new', '-key', key, '-subj', `/CN=${nodeId}`]);
  return stdout;
}

/** POSTs `body` to a control plane's node route `route` (with the node's credential, once it has one). */
export async function ask(url: string, route: string, body: string, credential?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url.replace(/\/$/, '')}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, text: await res.text() };
}

/** Written whole or not at all (a start interrupted mid-write must not leave half a file), root's only. */
export async function keep(file: string, content: string): Promise<void> {
  const partial = `${file}.partial`;
  await writeFile(partial, content.endsWith('\n') ? content : `${content}\n`, { mode: 0o600 });
  await rename(partial, file);
}

export function errorMessage(text: string): string {
  try {
    return String((JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text);
  } catch {
    return text.slice(0, 300);
  }
}
