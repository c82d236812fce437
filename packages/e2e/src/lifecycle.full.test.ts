import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Api, collectSocket } from './client.js';
import { hostResources, sandboxHostPid } from './host-state.js';
import { startPlatform, type RunningPlatform } from './platform.js';

function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

describe('sandbox deaths, restarts and large files', () => {
  let platform: RunningPlatform;
  let api: Api;

  before(async () => {
    platform = await startPlatform();
    api = new Api(platform.url, platform.adminKey);
  });

  after(async () => {
    if (platform.process.exitCode === null) assert.equal(await platform.stop(), 0, platform.output());
  });

  test('killing only the sandbox keeps the session: the next call resumes it with its files', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    await api.exec(session.id, 'echo kept > /workspace/note.txt; echo tmp-too > /tmp/scratch');
    assert.equal((await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`)).status, 200);
    const killed = await api.call('GET', `/v1/sessions/${session.id}`);
    assert.equal(killed.body.status, 'stopped');
    assert.equal(killed.body.sandbox, null);
    const resumed = await api.exec(session.id, 'cat /workspace/note.txt /tmp/scratch');
    assert.equal(resumed.stdout, 'kept\ntmp-too\n');
    const now = await api.call('GET', `/v1/sessions/${session.id}`);
    assert.equal(now.body.status, 'running');
    assert.notEqual(now.body.sandbox.id, session.sandbox.id);
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('SIGKILL of the sandbox process from outside: the next call resumes transparently', { timeout: 120_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    await api.exec(session.id, 'echo survived > /workspace/f');
    process.kill(sandboxHostPid(platform.dataDir, session.sandbox.id), 'SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    const result = await api.exec(session.id, 'cat /workspace/f');
    assert.deepEqual([result.exitCode, result.stdout], [0, 'survived\n']);
    // Streams resume too.
    const list = await api.call('GET', `/v1/sessions/${session.id}/files/list?path=/workspace`);
    assert.ok(list.body.entries.some((e: { name: string }) => e.name === 'f'));
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('a sandbox whose runtime stops answering (its Sentry frozen): a checkpoint or an exec ends in bounded time saying so, the sandbox is stopped, and the next call resumes with the files', {
    timeout: 300_000,
  }, async () => {
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    // `sync`: gVisor keeps written data in the Sentry until then, and a frozen Sentry is killed.
    await api.exec(session.id, 'echo kept > /workspace/f; sync');
    const sentry = sandboxHostPid(platform.dataDir, session.sandbox.id);
    const frozen = [sentry];
    // Every runsc command on it now waits for good: state, events, pause, kill, even delete --force.
    process.kill(sentry, 'SIGSTOP');
    try {
      const started = Date.now();
      const checkpoint = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
      const tookMs = Date.now() - started;
      console.log(`# a full checkpoint of a frozen sandbox answered ${checkpoint.status} after ${tookMs} ms: ${checkpoint.body.error?.message}`);
      // Its agent's flush (35 s), then its runtime's state (15 s), then its stop: delete --force (15 s), its processes killed, delete again.
      assert.equal(checkpoint.status, 503, JSON.stringify(checkpoint.body));
      assert.equal(checkpoint.body.error.code, 'SANDBOX_DIED');
      assert.match(checkpoint.body.error.message, /its runtime too .*the session resumes on the next call/);
      assert.ok(tookMs < 120_000, `the checkpoint took ${tookMs} ms`);
      assert.throws(() => process.kill(sentry, 0), 'the frozen Sentry was killed');
      const resumed = await api.exec(session.id, 'cat /workspace/f');
      assert.deepEqual([resumed.exitCode, resumed.stdout], [0, 'kept\n']);
      const next = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id;
      assert.notEqual(next, session.sandbox.id);

      // The same for an exec: its daemon answers by the exec's timeout (1 s) or not at all; 15 s past it, the sandbox is checked.
      const nextSentry = sandboxHostPid(platform.dataDir, next);
      frozen.push(nextSentry);
      process.kill(nextSentry, 'SIGSTOP');
      const execStarted = Date.now();
      const exec = await api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['true'], timeoutMs: 1000 });
      const execMs = Date.now() - execStarted;
      console.log(`# an exec in a frozen sandbox answered ${exec.status} after ${execMs} ms: ${exec.body.error?.message}`);
      assert.equal(exec.status, 503, JSON.stringify(exec.body));
      assert.equal(exec.body.error.code, 'SANDBOX_DIED');
      assert.ok(execMs < 90_000, `the exec took ${execMs} ms`);
      assert.throws(() => process.kill(nextSentry, 0), 'the frozen Sentry was killed');
      assert.equal((await api.exec(session.id, 'cat /workspace/f')).stdout, 'kept\n');
    } finally {
      for (const pid of frozen) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // killed, as it should be
        }
      }
      await api.call('DELETE', `/v1/sessions/${session.id}`);
    }
  });

  test("a sandbox's agent stopped by a process in it: the call that finds it ends in bounded time and the agent is continued, the session's processes running on; stopped again and again, the sandbox is stopped with its files written, and the session resumes", {
    timeout: 240_000,
  }, async () => {
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const exec = async (cmd: string) => {
      const started = Date.now();
      const reply = await api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sh', '-c', cmd], timeoutMs: 1000 });
      return { ...reply, ms: Date.now() - started };
    };
    try {
      // A file written and closed, and one a process of the session keeps mapped, written through the mapping (its pages
      // are the sandbox kernel's until synced). No sync: stopped by its node, the sandbox's kernel writes them to the volume.
      await api.exec(
        session.id,
        "head -c 300000 /dev/urandom | od -x > /workspace/data; md5sum /workspace/data > /workspace/sum; python3 -c \"import mmap, time; f = open('/workspace/mapped', 'w+b'); f.truncate(4096); m = mmap.mmap(f.fileno(), 4096); m[:7] = b'written'; time.sleep(600)\" > /dev/null 2>&1 & echo $! > /workspace/sleeper; sleep 1",
      );
      // Once: SIGSTOP, which no process can ignore.
      await api.exec(session.id, "sh -c 'sleep 1; kill -STOP $(pidof space-agent)' > /dev/null 2>&1 &");
      await new Promise((r) => setTimeout(r, 2000));
      const found = await exec('true');
      console.log(`# a call to a stopped agent answered ${found.status} after ${found.ms} ms: ${found.body.error?.message}`);
      assert.deepEqual([found.status, found.body.error?.code], [503, 'SANDBOX_UNAVAILABLE'], JSON.stringify(found.body));
      assert.match(found.body.error.message, /answers again since it was continued/);
      // The exec's timeout (1 s), 15 s for its answer, then a health check (5 s) and another once continued.
      assert.ok(found.ms < 40_000, `took ${found.ms} ms`);
      const served = await exec('kill -0 $(cat /workspace/sleeper) && echo running');
      assert.equal(served.body.stdout, 'running\n', "the same sandbox, the session's process still running");
      assert.equal((await api.call('GET', `/v1/sessions/${session.id}`)).body.sandbox.id, session.sandbox.id);

      // Again and again: a process stopping it every 50 ms.
      await api.exec(session.id, "sh -c 'a=$(pidof space-agent); sleep 1; while true; do kill -STOP $a; sleep 0.05; done' > /dev/null 2>&1 &");
      await new Promise((r) => setTimeout(r, 2000));
      const stuck = await exec('true');
      console.log(`# a call to an agent stopped again and again answered ${stuck.status} after ${stuck.ms} ms: ${stuck.body.error?.message}`);
      assert.deepEqual([stuck.status, stuck.body.error?.code], [503, 'SANDBOX_DIED'], JSON.stringify(stuck.body));
      assert.match(stuck.body.error.message, /stopped answering again.*the sandbox was stopped with its files/);
      assert.ok(stuck.ms < 40_000, `took ${stuck.ms} ms`);
      const resumed = await api.exec(
        session.id,
        'md5sum -c /workspace/sum; head -c 7 /workspace/mapped; echo; kill -0 $(cat /workspace/sleeper) 2>/dev/null || echo a new sandbox',
      );
      assert.equal(resumed.stdout, '/workspace/data: OK\nwritten\na new sandbox\n');
      const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory as { id: string; endReason: string | null }[];
      assert.deepEqual(
        history.map((h) => h.endReason),
        ['unresponsive', null],
      );
    } finally {
      await api.call('DELETE', `/v1/sessions/${session.id}`);
    }
  });

  test('a full checkpoint holding a process that stops the agent: the sandbox restored from it is stopped like the first, and the next resume boots on the files instead of restoring it again', {
    timeout: 360_000,
  }, async () => {
    const session = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const exec = (cmd: string) => api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: ['sh', '-c', cmd], timeoutMs: 1000 });
    /**
     * Lets the stopper loose and calls until the sandbox is stopped for not answering (continued once, it is stopped the
     * next time). A call may slip in between the agent's continue and the stopper's next stop: it answers 200.
     */
    const stopperLoose = async () => {
      assert.equal((await exec('touch /workspace/go')).status, 200);
      for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
        const reply = await exec('true');
        if (reply.body.error?.code === 'SANDBOX_DIED') return reply.body.error.details?.endReason;
        assert.ok(reply.status === 200 || reply.body.error?.code === 'SANDBOX_UNAVAILABLE', JSON.stringify(reply.body));
      }
      assert.fail('the sandbox was not stopped');
    };
    try {
      // The stopper waits for a file, not a time: a restored sleep may be over at once (the clock moves on).
      await api.exec(
        session.id,
        "echo kept > /workspace/kept; sh -c 'until [ -e /workspace/go ]; do sleep 0.1; done; a=$(pidof space-agent); while true; do kill -STOP $a; sleep 0.05; done' > /dev/null 2>&1 &",
      );
      const full = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
      assert.equal(full.body.kind, 'full', JSON.stringify(full.body));
      assert.equal(await stopperLoose(), 'unresponsive');
      // The next call restores the checkpoint (its volume went back: no `go` there), processes and all: the stopper with them.
      assert.equal(await stopperLoose(), 'unresponsive');
      const booted = await api.exec(session.id, 'cat /workspace/kept; ls /workspace/go; pgrep -f "[k]ill -STOP" > /dev/null || echo no stopper');
      assert.equal(booted.stdout, 'kept\n/workspace/go\nno stopper\n', 'the newest files, no process of the checkpoint');
      const history = (await api.call('GET', `/v1/sessions/${session.id}`)).body.sandboxHistory as {
        id: string;
        endReason: string | null;
        restoredFrom: string | null;
        note: string | null;
      }[];
      assert.deepEqual(
        history.map((h) => [h.endReason, h.restoredFrom]),
        [
          ['unresponsive', null],
          ['unresponsive', full.body.id],
          [null, null],
        ],
      );
      assert.match(
        history[2]!.note ?? '',
        new RegExp(`processes of ${full.body.id} were not restored: the sandbox restored from it \\(${history[1]!.id}\\) stopped answering`),
      );
    } finally {
      await api.call('DELETE', `/v1/sessions/${session.id}`);
    }
  });

  test('SIGKILL of the sandbox during a call and a stream: both end within seconds (SANDBOX_DIED), neither waits for an answer nobody sends', {
    timeout: 120_000,
  }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    const started = Date.now();
    const call = api.call('POST', `/v1/sessions/${session.id}/exec`, { cmd: 'sleep 60', timeoutMs: 90_000 });
    const streamed = collectSocket(api.socket(`/v1/sessions/${session.id}/exec/stream`), (ws) =>
      ws.send(JSON.stringify({ type: 'start', cmd: 'sleep 60', timeoutMs: 90_000 })),
    );
    await new Promise((r) => setTimeout(r, 1000));
    process.kill(sandboxHostPid(platform.dataDir, session.sandbox.id), 'SIGKILL');
    const reply = await call;
    assert.deepEqual([reply.status, reply.body.error?.code], [503, 'SANDBOX_DIED'], JSON.stringify(reply.body));
    const messages = await streamed;
    assert.ok(!messages.some((m) => m.type === 'exit'), `the stream ended without an exit: ${JSON.stringify(messages)}`);
    assert.ok(Date.now() - started < 15_000, `ended after ${Date.now() - started} ms`);
    assert.equal((await api.exec(session.id, 'echo again')).stdout, 'again\n', 'the next call resumes the session');
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('a sandbox that runs out of memory dies; the call says so and the session carries on', { timeout: 180_000 }, async () => {
    const session = await api.createSession({ template: 'base', resources: { memoryMb: 256 } });
    await api.exec(session.id, 'echo before > /workspace/m');
    const hog = await api.call('POST', `/v1/sessions/${session.id}/exec`, {
      cmd: `python3 -c "x = bytearray(700*1024*1024); x[::4096] = b'a' * len(x[::4096])"`,
    });
    if (hog.status === 200) {
      // gVisor may also deliver the OOM as a killed process inside a surviving sandbox.
      assert.notEqual(hog.body.exitCode, 0);
    } else {
      assert.equal(hog.status, 503);
      assert.equal(hog.body.error.code, 'SANDBOX_DIED');
    }
    assert.equal((await api.exec(session.id, 'cat /workspace/m')).stdout, 'before\n');
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test("memory, CPU and task limits: the sandbox sees the session's, its host cgroup has the backstops above them", { timeout: 60_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', resources: { memoryMb: 300, cpus: 0.5, pids: 300 } });
    const cgroup = (controller: string, file: string): string =>
      readFileSync(`/sys/fs/cgroup/${controller}/space/${session.sandbox.id}/${file}`, 'utf8').trim();
    // docs/operations.md: memory memoryMb × 1.25 + 256 MiB, tasks pids × 10 + 256.
    assert.equal(cgroup('memory', 'memory.limit_in_bytes'), String((300 * 1.25 + 256) * 1024 * 1024));
    assert.equal(cgroup('cpu', 'cpu.cfs_quota_us'), '50000');
    assert.equal(cgroup('pids', 'pids.max'), String(300 * 10 + 256));
    const inside = await api.exec(session.id, ['sh', '-c', 'head -1 /proc/meminfo; ulimit -u']);
    assert.match(inside.stdout, /^MemTotal:\s+307200 kB\n300\n$/, inside.stdout);
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('a full checkpoint of a session near its memory limit is taken, and its process lives on after a resume', { timeout: 180_000 }, async () => {
    // 360 MiB held of 400: the image the Sentry writes is charged to the sandbox's cgroup, whose
    // backstop (756 MiB) would not hold both without the allowance the checkpoint makes for it.
    const session = await api.createSession({ template: 'base', resources: { memoryMb: 400 }, checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    const limit = (): string => readFileSync(`/sys/fs/cgroup/memory/space/${session.sandbox.id}/memory.limit_in_bytes`, 'utf8').trim();
    const backstop = limit();
    const holder = "import time; held = [bytearray(b'x') * (1 << 20) for _ in range(360)]; open('/tmp/held', 'w').close(); time.sleep(1e9)";
    await api.exec(session.id, ['python3', '-c', holder], { background: true });
    for (let i = 0; i < 300 && (await api.exec(session.id, ['test', '-e', '/tmp/held'])).exitCode !== 0; i++) await new Promise((r) => setTimeout(r, 200));
    const checkpoint = await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'full' });
    assert.equal(checkpoint.status, 201, JSON.stringify(checkpoint.body));
    assert.ok(checkpoint.body.sizeBytes > 360 * 2 ** 20, `image of ${checkpoint.body.sizeBytes} bytes`);
    assert.equal(limit(), backstop, 'the backstop is put back once the image is stored');
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    assert.equal((await api.exec(session.id, ['pgrep', '-f', 'bytearray'])).exitCode, 0, 'the process holding the memory was restored');
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('100 MB upload and download are streamed: same bytes, bounded memory', { timeout: 300_000 }, async () => {
    const session = await api.createSession({ template: 'tiny' });
    const size = 100 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024);
    const expected = createHash('sha256');
    let sent = 0;
    const body = new Readable({
      read() {
        if (sent >= size) return this.push(null);
        chunk.writeUInt32LE(sent, 0);
        expected.update(chunk);
        sent += chunk.length;
        this.push(Buffer.from(chunk));
      },
    });
    const url = new URL(`/v1/sessions/${session.id}/files?path=big.bin`, platform.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(url, { method: 'PUT', headers: { authorization: `Bearer ${platform.adminKey}`, 'content-length': size } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      body.pipe(req);
    });
    assert.equal(status, 200);
    assert.equal((await api.exec(session.id, 'stat -c %s /workspace/big.bin')).stdout.trim(), String(size));
    const res = await fetch(new URL(`/v1/sessions/${session.id}/files?path=big.bin`, platform.url), {
      headers: { authorization: `Bearer ${platform.adminKey}` },
    });
    const got = createHash('sha256');
    let received = 0;
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      got.update(part);
      received += part.length;
    }
    assert.equal(received, size);
    assert.equal(got.digest('hex'), expected.digest('hex'));
    assert.ok(peakRssMb(platform.process.pid!) < 400, `platform peak RSS ${peakRssMb(platform.process.pid!)} MB: the file was buffered`);
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });

  test('stopping leaves nothing behind and a restart finds its sessions again', { timeout: 300_000 }, async () => {
    const session = await api.createSession({ template: 'tiny', metadata: { purpose: 'restart' } });
    await api.exec(session.id, 'echo persisted > /workspace/p');
    const netnsBefore = hostResources(platform.dataDir).netns;
    assert.ok(netnsBefore.includes(`space-${session.sandbox.id}`));
    assert.equal(await platform.stop(), 0, platform.output());
    const left = hostResources(platform.dataDir);
    assert.deepEqual(
      { ...left, netns: left.netns.filter((n) => n === `space-${session.sandbox.id}`) },
      { runsc: [], netns: [], mounts: [], loops: [], staged: [] },
    );

    platform = await startPlatform({ adminKey: platform.adminKey });
    api = new Api(platform.url, platform.adminKey);
    const found = await api.call('GET', `/v1/sessions/${session.id}`);
    assert.equal(found.status, 200);
    assert.equal(found.body.metadata.purpose, 'restart');
    assert.equal(found.body.status, 'stopped');
    assert.equal((await api.exec(session.id, 'cat /workspace/p')).stdout, 'persisted\n');
    await api.call('DELETE', `/v1/sessions/${session.id}`);
  });
});
