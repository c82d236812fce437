import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import path from 'node:path';
import type { SandboxIdentity } from '@space/protocol';
import { writeFreshFile } from '@space/server-kit';

/** Where space-init (PID 1, the only process with CAP_SYS_ADMIN) reads the hostname to set on SIGUSR1. */
const hostnameRequestFile = '/run/space/hostname';
const machineIdFile = '/etc/machine-id';
const hostnameWaitMs = 2000;

/** Writes a file by creating a fresh one next to it (never through a link a session left) and renaming it into place. */
async function replaceFile(file: string, data: string, mode: number): Promise<void> {
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.space-new`);
  await writeFreshFile(temp, data, mode);
  await rename(temp, file);
}

/**
 * Takes on the identity the node agent gives a sandbox that now serves a session: a clone restored
 * from a memory image keeps the image's hostname (and its files their machine id) otherwise. The
 * hostname is set by space-init, which alone may; this waits until the kernel reports it.
 */
export async function applySandboxIdentity(identity: SandboxIdentity): Promise<void> {
  const hasEtc = await stat(path.dirname(machineIdFile)).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (identity.machineId && hasEtc) await replaceFile(machineIdFile, `${identity.machineId}\n`, 0o444);
  if (hostname() === identity.hostname) return;
  await mkdir(path.dirname(hostnameRequestFile), { recursive: true, mode: 0o755 });
  await replaceFile(hostnameRequestFile, `${identity.hostname}\n`, 0o644);
  process.kill(1, 'SIGUSR1');
  const deadline = Date.now() + hostnameWaitMs;
  while (hostname() !== identity.hostname) {
    if (Date.now() > deadline) throw new Error(`the sandbox's init did not set the hostname ${identity.hostname} within ${hostnameWaitMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
  await rm(hostnameRequestFile, { force: true });
}
