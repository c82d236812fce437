import { mkdir, open, readFile, unlink } from 'node:fs/promises';
import path from 'node:path';
import { processAlive } from '@space/server-kit';

/**
 * One node agent per data directory: a second one would adopt, and then kill, the first one's
 * sandboxes. The lock file holds the owner's pid; a lock whose process is gone (or a zombie) is taken over.
 */
export class DataDirLock {
  private readonly file: string;
  private held = false;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, 'node', 'lock');
  }

  async acquire(): Promise<void> {
    await mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const handle = await open(this.file, 'wx', 0o600);
        await handle.writeFile(String(process.pid));
        await handle.close();
        this.held = true;
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const owner = Number((await readFile(this.file, 'utf8').catch(() => '')).trim());
        // A zombie holds nothing: an agent SIGKILLed whose parent has not reaped it yet (an orphan waits for init).
        if (owner && owner !== process.pid && processAlive(owner)) {
          throw new Error(
            `another SPACE node agent (pid ${owner}) is using ${path.dirname(path.dirname(this.file))}; stop it or choose another SPACE_DATA_DIR`,
          );
        }
        await unlink(this.file).catch(() => undefined);
      }
    }
    throw new Error(`cannot take the lock ${this.file}`);
  }

  isHeld(): boolean {
    return this.held;
  }

  async release(): Promise<void> {
    if (!this.held) return;
    this.held = false;
    await unlink(this.file).catch(() => undefined);
  }
}
