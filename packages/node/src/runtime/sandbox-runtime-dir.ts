import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { readInsideVolume, writeInsideVolume } from './volume-paths.js';

/** Where things sit inside the sandbox once the runtime directory is mounted at /.space. */
export const inSandbox = {
  mount: '/.space',
  agent: '/.space/space-agent',
  init: '/.space/space-init',
  pty: '/.space/space-pty',
  compat: '/.space/space-compat.so',
} as const;

const runtimeFiles = [
  'space-agent',
  'space-init',
  'space-pty',
  'space-compat.so',
  'space_unix_http.py',
  'space-code-server.py',
  'space_code_cell.py',
  'space_code_kernels.py',
  'space-js-kernel.js',
  'space-desktop-server.py',
  'space_desktop_display.py',
  'space_desktop_input.py',
];

/**
 * Prepares the read-only directory mounted into every sandbox: the agent and its helpers, all
 * static (but the preload library), so they run the same way on any template, busybox included. A
 * directory per content hash and runtime version: running sandboxes keep the one they mounted when
 * the build changes, and a memory image is restored only under the directory it was saved with, so
 * an image of another agent build or another runsc release is never restored (its files are).
 */
export async function prepareRuntimeDir(parent: string, buildDir: string, runtimeVersion: string): Promise<string> {
  const files = runtimeFiles.map((f) => path.join(buildDir, f));
  for (const f of files) if (!existsSync(f)) throw new Error(`${f} is missing: run "npm run build" (./space does it)`);
  const hash = createHash('sha256').update(`${runtimeVersion}\n`);
  for (const f of files) hash.update(await readFile(f));
  const target = path.join(parent, hash.digest('hex').slice(0, 16));
  if (existsSync(target)) return target;

  const scratch = `${target}.tmp-${process.pid}`;
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true });
  for (const f of files) await copyFile(f, path.join(scratch, path.basename(f)));
  await rename(scratch, target);
  // Older versions are no longer mounted by new sandboxes; running ones hold their own mount.
  for (const entry of await readdir(parent)) {
    if (path.join(parent, entry) !== target) await rm(path.join(parent, entry), { recursive: true, force: true }).catch(() => undefined);
  }
  return target;
}

/**
 * Makes the glibc programs of a new volume (a fresh snapshot of a template, nothing of a session's
 * in it yet) preload space-compat.so from the runtime directory, through /etc/ld.so.preload. Templates
 * without glibc's loader (busybox) are left alone.
 */
export async function installCompatPreload(rootfs: string): Promise<void> {
  if (!existsSync(path.join(rootfs, 'lib64/ld-linux-x86-64.so.2')) || !existsSync(path.join(rootfs, 'etc'))) return;
  // The volume's files may be a session's or an image's: links are not followed out of it.
  const current = (await readInsideVolume(rootfs, 'etc/ld.so.preload')) ?? '';
  if (current.split(/\s+/).includes(inSandbox.compat)) return;
  await writeInsideVolume(rootfs, 'etc/ld.so.preload', `${current}${current && !current.endsWith('\n') ? '\n' : ''}${inSandbox.compat}\n`, 0o644);
}
