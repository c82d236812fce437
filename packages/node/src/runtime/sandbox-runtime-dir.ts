import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';

export interface RuntimeDirSources {
  /** The Node.js binary the daemon runs on (the host's own). */
  nodeBinary: string;
  /** Directory with space-daemon.mjs, space-init, space-pty and space-compat.so. */
  daemonBundleDir: string;
}

/** Where things sit inside the sandbox once the runtime directory is mounted at /.space. */
export const inSandbox = {
  mount: '/.space',
  loader: '/.space/lib/ld-linux-x86-64.so.2',
  libs: '/.space/lib',
  node: '/.space/node',
  daemon: '/.space/space-daemon.mjs',
  init: '/.space/space-init',
  pty: '/.space/space-pty',
  compat: '/.space/space-compat.so',
} as const;

/**
 * Prepares the read-only directory mounted into every sandbox: the host's Node.js with the shared
 * libraries it links against, started through their own dynamic loader, so the daemon runs the same
 * way on any template (busybox has no libc; Debian's node is older) without touching the rootfs.
 */
export async function prepareRuntimeDir(parent: string, sources: RuntimeDirSources): Promise<string> {
  const files = ['space-daemon.mjs', 'space-init', 'space-pty', 'space-compat.so'].map((f) => path.join(sources.daemonBundleDir, f));
  for (const f of files) if (!existsSync(f)) throw new Error(`${f} is missing: run "npm run build" (./space does it)`);
  const libs = await sharedLibraries(sources.nodeBinary);
  const hash = createHash('sha256');
  for (const f of [sources.nodeBinary, ...libs]) {
    const s = await stat(f);
    hash.update(`${f}:${s.size}:${s.mtimeMs}\n`);
  }
  for (const f of files) hash.update(await readFile(f));
  const target = path.join(parent, hash.digest('hex').slice(0, 16));
  if (existsSync(target)) return target;

  const scratch = `${target}.tmp-${process.pid}`;
  await rm(scratch, { recursive: true, force: true });
  await mkdir(path.join(scratch, 'lib'), { recursive: true });
  await copyFile(sources.nodeBinary, path.join(scratch, 'node'));
  for (const lib of libs) await copyFile(lib, path.join(scratch, 'lib', path.basename(lib)));
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
  const file = path.join(rootfs, 'etc/ld.so.preload');
  const current = existsSync(file) ? await readFile(file, 'utf8') : '';
  if (current.split(/\s+/).includes(inSandbox.compat)) return;
  await writeFile(file, `${current}${current && !current.endsWith('\n') ? '\n' : ''}${inSandbox.compat}\n`, { mode: 0o644 });
}

async function sharedLibraries(binary: string): Promise<string[]> {
  const { stdout } = await runCommand(['ldd', binary]);
  const libs = new Set<string>();
  for (const match of stdout.matchAll(/(\/[^\s]+\.so[^\s]*)/g)) libs.add(match[1]!);
  const loader = [...libs].find((l) => path.basename(l).startsWith('ld-linux'));
  if (!loader) throw new Error(`cannot find the dynamic loader of ${binary} in ldd output`);
  return [...libs];
}
