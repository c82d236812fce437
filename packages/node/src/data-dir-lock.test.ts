import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DataDirLock } from './data-dir-lock.js';

/** A lock file naming `pid`, as a node agent that was `pid` left it. */
async function lockedBy(dataDir: string, pid: number): Promise<void> {
  await mkdir(path.join(dataDir, 'node'), { recursive: true });
  await writeFile(path.join(dataDir, 'node', 'lock'), String(pid));
}

test('the data directory lock: a live owner keeps it; a zombie or a gone one is taken over', async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'space-lock-'));
  // `sh` starts a short child and becomes a `sleep` that never reaps it: the child stays a zombie
  // (as a SIGKILLed node agent does until its parent reaps it) and the `sleep` is a live process.
  const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(async () => {
    parent.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  const zombie = Number(await new Promise<string>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(d.toString()))));
  for (let waited = 0; (await readFile(`/proc/${zombie}/stat`, 'utf8')).split(') ')[1]![0] !== 'Z'; waited += 10) {
    assert.ok(waited < 5000, 'the child became a zombie');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }

  await lockedBy(dataDir, parent.pid!);
  await assert.rejects(new DataDirLock(dataDir).acquire(), new RegExp(`another SPACE node agent \\(pid ${parent.pid}\\) is using ${dataDir}`));

  await lockedBy(dataDir, zombie);
  const lock = new DataDirLock(dataDir);
  await lock.acquire();
  assert.equal(await readFile(path.join(dataDir, 'node', 'lock'), 'utf8'), String(process.pid));
  await lock.release();

  const gone = spawn('true');
  await new Promise((resolve) => gone.once('exit', resolve));
  await lockedBy(dataDir, gone.pid!);
  const again = new DataDirLock(dataDir);
  await again.acquire();
  assert.ok(again.isHeld());
  await again.release();
});
