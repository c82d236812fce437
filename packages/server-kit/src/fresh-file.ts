import { constants } from 'node:fs';
import { open, rm } from 'node:fs/promises';

/**
 * Creates `file` anew with `data`: whatever was at the path (a file, a directory, a link a session
 * left there) is removed first, and the new file is opened with O_EXCL|O_NOFOLLOW, so the write can
 * never go through a link to somewhere else.
 */
export async function writeFreshFile(file: string, data: string, mode: number): Promise<void> {
  await rm(file, { force: true, recursive: true });
  const handle = await open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    await handle.writeFile(data);
  } finally {
    await handle.close();
  }
}
