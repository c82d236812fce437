import { lstat, mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { writeFreshFile } from '@space/server-kit';

/**
 * Writes a file into a session's volume from the host, which runs as root: every directory on the
 * way is made a real directory inside the volume (a symlink a session left there is removed, not
 * followed, so the write cannot land elsewhere on the host), and the file is opened with O_NOFOLLOW.
 * Only for volumes whose sandbox is not running (nothing inside can swap a path meanwhile).
 */
export async function writeInsideVolume(rootfs: string, relative: string, data: string, mode: number): Promise<string> {
  const parts = relative.split('/').filter(Boolean);
  let dir = rootfs;
  for (const part of parts.slice(0, -1)) {
    dir = path.join(dir, part);
    const stat = await lstat(dir).catch(() => null);
    if (stat && !stat.isDirectory()) await rm(dir, { force: true });
    if (!stat?.isDirectory()) await mkdir(dir, { mode: 0o755 });
  }
  const file = path.join(dir, parts.at(-1)!);
  await writeFreshFile(file, data, mode);
  return file;
}

/**
 * Reads a regular file inside a volume from the host, or null when it is missing or any part of its
 * path is a link or not what it should be (a link a session or an image left could name a host file).
 */
export async function readInsideVolume(rootfs: string, relative: string): Promise<string | null> {
  let at = rootfs;
  const parts = relative.split('/').filter(Boolean);
  for (const [i, part] of parts.entries()) {
    at = path.join(at, part);
    const stat = await lstat(at).catch(() => null);
    if (!stat || (i < parts.length - 1 ? !stat.isDirectory() : !stat.isFile())) return null;
  }
  return readFile(at, 'utf8');
}
