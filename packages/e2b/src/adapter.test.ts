import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Code, ConnectError } from '@connectrpc/connect';
import { fromBinary, fromJson, toBinary, toJson, create } from '@bufbuild/protobuf';
import { ErrorCode, SpaceError } from '@space/protocol';
import { SpaceApiError, SpaceClientError } from '@space/sdk';
import { egressFromE2b } from './control-api.js';
import { E2bError, toConnectError, toE2bError } from './errors.js';
import { withKeepalives } from './envd/keepalive.js';
import { StartResponseSchema } from './gen/process_pb.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createE2bApi } from './e2b-api.js';

test("E2B's network settings become an egress policy; deny lists other than everything are refused", () => {
  assert.deepEqual(egressFromE2b({}), { mode: 'allow-all', domains: [], cidrs: [] });
  assert.deepEqual(egressFromE2b({ allow_internet_access: false }), { mode: 'deny-all', domains: [], cidrs: [] });
  assert.deepEqual(egressFromE2b({ denyOut: ['0.0.0.0/0'] }), { mode: 'deny-all', domains: [], cidrs: [] });
  assert.deepEqual(egressFromE2b({ allowOut: ['1.2.3.4', '10.0.0.0/8', 'api.example.com', '*.pypi.org', 'add.cafe'], denyOut: ['0.0.0.0/0'] }), {
    mode: 'allow-list',
    cidrs: ['1.2.3.4/32', '10.0.0.0/8'],
    domains: ['api.example.com', '*.pypi.org', 'add.cafe'],
  });
  assert.throws(
    () => egressFromE2b({ denyOut: ['10.0.0.0/8'] }),
    (err) => err instanceof E2bError && err.status === 400,
  );
});

test('errors keep their status and name our code, on the HTTP API and as Connect codes', () => {
  const notFound = new SpaceApiError(ErrorCode.SESSION_NOT_FOUND, 404, 'no session "x"');
  assert.deepEqual([toE2bError(notFound).status, toE2bError(notFound).message], [404, 'SESSION_NOT_FOUND: no session "x"']);
  assert.equal(toE2bError(new SpaceError(ErrorCode.TOO_MANY_REQUESTS, 'slow down')).status, 429);
  assert.equal(toE2bError(new Error('boom')).status, 500);
  assert.equal(toE2bError(new SpaceClientError('NETWORK', 'refused')).status, 503);
  assert.equal(toE2bError(new SpaceClientError('TIMEOUT', 'slow')).status, 504);
  assert.equal(toConnectError(notFound).code, Code.NotFound);
  assert.equal(toConnectError(new SpaceApiError(ErrorCode.FILE_EXISTS, 409, 'exists')).code, Code.AlreadyExists);
  assert.equal(toConnectError(new SpaceApiError(ErrorCode.UNAUTHORIZED, 401, 'bad key')).code, Code.Unauthenticated);
  assert.equal(toConnectError(new SpaceApiError(ErrorCode.SANDBOX_UNAVAILABLE, 503, 'down')).code, Code.Unavailable);
  const kept = new ConnectError('as is', Code.InvalidArgument);
  assert.equal(toConnectError(kept), kept);
});

test("envd's process events encode the same in JSON and binary (field names and numbers as envd's)", () => {
  const event = create(StartResponseSchema, { event: { event: { case: 'data', value: { output: { case: 'stdout', value: Buffer.from('hi') } } } } });
  assert.deepEqual(toJson(StartResponseSchema, event), { event: { data: { stdout: 'aGk=' } } });
  const end = create(StartResponseSchema, { event: { event: { case: 'end', value: { exitCode: -1, exited: false, status: 'signal: SIGKILL' } } } });
  // exit_code is sint32 field 1 of EndEvent (zigzag: -1 is 1), inside field 3 of ProcessEvent, inside field 1.
  assert.deepEqual([...toBinary(StartResponseSchema, end)].slice(0, 6), [0x0a, 0x15, 0x1a, 0x13, 0x08, 0x01]);
  assert.deepEqual(fromBinary(StartResponseSchema, toBinary(StartResponseSchema, end)).event?.event, end.event?.event);
  assert.equal(fromJson(StartResponseSchema, { event: { start: { pid: 7 } } }).event?.event.case, 'start');
});

test('a quiet stream gets keepalives; the source ends the stream, and so does the client leaving', async () => {
  async function* slow() {
    yield 'a';
    await new Promise((r) => setTimeout(r, 130));
    yield 'b';
  }
  const seen: string[] = [];
  for await (const item of withKeepalives(slow(), 50, () => 'k', new AbortController().signal)) seen.push(item);
  assert.equal(seen[0], 'a');
  assert.equal(seen.at(-1), 'b');
  assert.ok(seen.filter((s) => s === 'k').length >= 2, seen.join(','));

  const leaving = new AbortController();
  const never = (async function* () {
    await new Promise(() => undefined);
    yield 'x';
  })();
  setTimeout(() => leaving.abort(), 30);
  const started = Date.now();
  for await (const _ of withKeepalives(never, 1000, () => 'k', leaving.signal)) assert.fail('nothing comes');
  assert.ok(Date.now() - started < 500);
});

test('envd requests the adapter cannot decode are 400 invalid_argument (binary and JSON alike); unknown procedures unimplemented', async () => {
  const logged: string[] = [];
  const e2b = createE2bApi({ apiUrl: () => 'http://127.0.0.1:9', log: (m) => logged.push(m) });
  const server = createServer((req, res) => void e2b.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/e2b/sandbox`;
  const post = async (path: string, contentType: string, body: string | Uint8Array<ArrayBuffer>) => {
    const res = await fetch(url + path, {
      method: 'POST',
      headers: { 'content-type': contentType, 'e2b-sandbox-id': 'ses_x', 'x-access-token': 'st_x' },
      body,
    });
    return { status: res.status, body: await res.json() };
  };
  try {
    const binary = await post('/process.Process/List', 'application/proto', new Uint8Array([0x08]));
    assert.deepEqual([binary.status, binary.body.code], [400, 'invalid_argument']);
    assert.match(binary.body.message, /not a valid message/);
    const json = await post('/filesystem.Filesystem/Stat', 'application/json', '{"path": 5');
    assert.deepEqual([json.status, json.body.code], [400, 'invalid_argument']);
    const unknown = await post('/process.Process/Nope', 'application/json', '{}');
    assert.deepEqual([unknown.status, unknown.body.code], [404, 'unimplemented']);
    // The same on the streaming path, in the stream's end message: a compressed envelope with no
    // encoding named, and garbage protobuf in an envelope.
    const envelope = (flags: number, data: number[]) => new Uint8Array([flags, 0, 0, 0, data.length, ...data]);
    for (const [what, body] of [
      ['compressed flag, no encoding', envelope(0x01, [0x0a, 0x00])],
      ['garbage protobuf', envelope(0x00, [0x08])],
    ] as const) {
      const res = await fetch(`${url}/process.Process/Start`, {
        method: 'POST',
        headers: { 'content-type': 'application/connect+proto', 'e2b-sandbox-id': 'ses_x', 'x-access-token': 'st_x' },
        body,
      });
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes[0]! & 0x02, 0x02, `${what}: an end message`);
      const end = JSON.parse(bytes.subarray(5, 5 + bytes.readUInt32BE(1)).toString());
      assert.equal(end.error?.code, 'invalid_argument', `${what}: ${JSON.stringify(end)}`);
    }
    assert.deepEqual(logged, []);
  } finally {
    server.close();
    e2b.close();
  }
});
