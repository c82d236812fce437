import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, collectSocket, decodeOutput } from './client.js';
import { startPlatform, type RunningPlatform } from './platform.js';

const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('streams: exec, background processes, PTY, signals, watch', () => {
  let platform: RunningPlatform;
  let api: Api;
  let sessionId: string;

  before(async () => {
    platform = await startPlatform();
    api = new Api(platform.url, platform.adminKey);
    sessionId = (await api.createSession({ template: 'base' })).id;
  });

  after(async () => {
    await api.call('DELETE', `/v1/sessions/${sessionId}`).catch(() => undefined);
    assert.equal(await platform.stop(), 0, platform.output());
  });

  test('streamed exec sends stdout and stderr as they come, takes stdin, ends with the exit code', { timeout: 60_000 }, async () => {
    const ws = api.socket(`/v1/sessions/${sessionId}/exec/stream`);
    const messages = await collectSocket(ws, (s) => {
      s.send(JSON.stringify({ type: 'start', cmd: 'read line; echo "got $line"; echo warn >&2; exit 7' }));
      s.send(JSON.stringify({ type: 'stdin', data: b64('hello\n') }));
    });
    assert.equal(messages[0].type, 'started');
    assert.equal(decodeOutput(messages, 'stdout'), 'got hello\n');
    assert.equal(decodeOutput(messages, 'stderr'), 'warn\n');
    assert.deepEqual(messages.at(-1), { type: 'exit', exitCode: 7, signal: null, timedOut: false });
  });

  test('a signal sent on the stream stops the process', { timeout: 60_000 }, async () => {
    const ws = api.socket(`/v1/sessions/${sessionId}/exec/stream`);
    const messages = await collectSocket(ws, (s) => {
      s.send(JSON.stringify({ type: 'start', cmd: ['sleep', '60'] }));
      setTimeout(() => s.send(JSON.stringify({ type: 'signal', signal: 'SIGTERM' })), 300);
    });
    const exit = messages.at(-1);
    assert.equal(exit.type, 'exit');
    assert.equal(exit.signal, 'SIGTERM');
  });

  test('a malformed stream message gets an error, not a crash', { timeout: 60_000 }, async () => {
    const ws = api.socket(`/v1/sessions/${sessionId}/exec/stream`);
    const messages = await collectSocket(ws, (s) => s.send(JSON.stringify({ type: 'start', cmd: 42 })));
    assert.equal(messages[0].type, 'error');
    assert.equal(messages[0].code, 'VALIDATION_FAILED');
    assert.equal((await api.exec(sessionId, 'echo still-fine')).stdout, 'still-fine\n');
  });

  test('background processes keep running, are listed, and can be re-attached by pid', { timeout: 60_000 }, async () => {
    const started = await api.exec(sessionId, 'for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.2; done', { background: true });
    assert.ok(Number.isInteger(started.pid));
    const list = await api.call('GET', `/v1/sessions/${sessionId}/processes`);
    assert.ok(list.body.processes.some((p: { pid: number; running: boolean }) => p.pid === started.pid && p.running));
    const messages = await collectSocket(api.socket(`/v1/sessions/${sessionId}/processes/${started.pid}/attach`));
    const text = decodeOutput(messages, 'stdout');
    // Re-attaching replays what was already printed, then follows live output to the end.
    assert.equal(text, [1, 2, 3, 4, 5, 6].map((i) => `tick ${i}\n`).join(''));
    assert.equal(messages.at(-1).exitCode, 0);
    const after = await api.call('GET', `/v1/sessions/${sessionId}/processes`);
    assert.ok(after.body.processes.some((p: { pid: number; running: boolean; exitCode: number }) => p.pid === started.pid && !p.running && p.exitCode === 0));
  });

  test('signal endpoint and unknown pids', { timeout: 60_000 }, async () => {
    const { pid } = await api.exec(sessionId, ['sleep', '100'], { background: true });
    assert.equal((await api.call('POST', `/v1/sessions/${sessionId}/processes/${pid}/signal`, { signal: 'SIGKILL' })).status, 200);
    const messages = await collectSocket(api.socket(`/v1/sessions/${sessionId}/processes/${pid}/attach`));
    assert.equal(messages.at(-1).signal, 'SIGKILL');
    const unknown = await api.call('POST', `/v1/sessions/${sessionId}/processes/999999/signal`, { signal: 'SIGTERM' });
    assert.equal(unknown.body.error.code, 'PROCESS_NOT_FOUND');
    const badSignal = await api.call('POST', `/v1/sessions/${sessionId}/processes/${pid}/signal`, { signal: 'SIGNOPE' });
    assert.equal(badSignal.status, 400);
  });

  test('PTY: a real terminal with a size that can change', { timeout: 60_000 }, async () => {
    const ws = api.socket(`/v1/sessions/${sessionId}/pty`);
    const messages = await collectSocket(ws, (s) => {
      s.send(JSON.stringify({ type: 'start', cmd: ['/bin/bash', '--norc', '-i'], cols: 100, rows: 30 }));
      s.send(JSON.stringify({ type: 'stdin', data: b64('tty; stty size\n') }));
      setTimeout(() => {
        s.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
        s.send(JSON.stringify({ type: 'stdin', data: b64('stty size; exit 5\n') }));
      }, 800);
    });
    const text = decodeOutput(messages, 'stdout');
    assert.match(text, /\/dev\/pts\/\d+/);
    assert.match(text, /30 100/);
    assert.match(text, /40 120/);
    assert.equal(messages.at(-1).exitCode, 5);
  });

  test('watch reports changes under a directory', { timeout: 60_000 }, async () => {
    await api.call('POST', `/v1/sessions/${sessionId}/files/mkdir`, { path: 'watched' });
    const ws = api.socket(`/v1/sessions/${sessionId}/files/watch?path=watched`);
    const events: any[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.on('message', async (raw) => {
        const event = JSON.parse(raw.toString());
        events.push(event);
        if (event.type === 'ready') await api.call('PUT', `/v1/sessions/${sessionId}/files?path=watched/new.txt`, undefined, { raw: 'x' });
        if (event.type === 'change' && String(event.path).includes('new.txt')) resolve();
      });
      ws.on('error', reject);
      setTimeout(() => reject(new Error(`no change event: ${JSON.stringify(events)}`)), 10_000);
    });
    ws.close();
  });

  test('file operations: stat, mkdir, move, remove', { timeout: 60_000 }, async () => {
    const base = `/v1/sessions/${sessionId}/files`;
    await api.call('PUT', `${base}?path=ops/a.txt`, undefined, { raw: 'alpha' });
    const stat = await api.call('GET', `${base}/stat?path=ops/a.txt`);
    assert.deepEqual([stat.body.type, stat.body.size], ['file', 5]);
    assert.equal((await api.call('POST', `${base}/mkdir`, { path: 'ops/sub/deeper' })).status, 200);
    assert.equal((await api.call('POST', `${base}/move`, { from: 'ops/a.txt', to: 'ops/sub/b.txt' })).status, 200);
    assert.equal((await api.call('GET', `${base}/stat?path=ops/a.txt`)).status, 404);
    await api.call('PUT', `${base}?path=ops/c.txt`, undefined, { raw: 'gamma' });
    const clash = await api.call('POST', `${base}/move`, { from: 'ops/c.txt', to: 'ops/sub/b.txt' });
    assert.equal(clash.body.error.code, 'FILE_EXISTS');
    assert.equal((await api.call('DELETE', `${base}?path=ops/sub`)).body.error.code, 'DIRECTORY_NOT_EMPTY');
    assert.equal((await api.call('DELETE', `${base}?path=ops/sub&recursive=true`)).status, 200);
    const list = await api.call('GET', `${base}/list?path=ops`);
    assert.deepEqual(
      list.body.entries.map((e: { name: string }) => e.name),
      ['c.txt'],
    );
  });

  test('floods of output are bounded: buffered exec truncates, streams keep flowing, the platform survives', { timeout: 120_000 }, async () => {
    const flood = await api.exec(sessionId, 'head -c 30000000 /dev/zero | tr "\\0" a');
    assert.equal(flood.truncated, true);
    assert.equal(flood.stdout.length, 8 * 1024 * 1024);
    const ws = api.socket(`/v1/sessions/${sessionId}/exec/stream`);
    let bytes = 0;
    await new Promise<void>((resolve, reject) => {
      ws.on('open', () => ws.send(JSON.stringify({ type: 'start', cmd: 'head -c 20000000 /dev/zero' })));
      ws.on('message', (raw) => {
        const m = JSON.parse(raw.toString());
        if (m.type === 'stdout') bytes += Buffer.from(m.data, 'base64').length;
      });
      ws.on('close', () => resolve());
      ws.on('error', reject);
    });
    assert.equal(bytes, 20_000_000);
    assert.equal((await api.exec(sessionId, 'echo ok')).stdout, 'ok\n');
  });
});
