import assert from 'node:assert/strict';
import { test } from 'node:test';
import { otlpTraces } from './otlp-exporter.js';
import { type FinishedSpan, Tracer, activeSpan, inSpan, parseTraceparent, recordReportedSpan } from './tracing.js';

function collecting(): { tracer: Tracer; spans: FinishedSpan[] } {
  const spans: FinishedSpan[] = [];
  return { tracer: new Tracer('space-test', { add: (s) => spans.push(s) }), spans };
}

test('a traceparent is read as W3C writes it; anything else starts a new trace', () => {
  assert.deepEqual(parseTraceparent(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`), { traceId: 'a'.repeat(32), parentSpanId: 'b'.repeat(16), sampled: true });
  assert.equal(parseTraceparent(`00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`)?.sampled, false);
  for (const bad of [
    undefined,
    '',
    `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01`,
    `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`,
    `00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`,
    ['x'],
  ])
    assert.equal(parseTraceparent(bad), null, String(bad));
});

test('spans nest through awaits under the request that started them; outside a traced call nothing is made', async () => {
  const { tracer, spans } = collecting();
  assert.equal(await inSpan('alone', {}, async () => activeSpan()), undefined, 'no span without a traced call');
  const caller = `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`;
  await tracer.serve('GET /x', { traceparent: caller }, async (span) => {
    await inSpan('outer', { k: 'v' }, async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      await inSpan('inner', {}, async () => assert.equal(activeSpan()?.name, 'inner'));
    });
    await assert.rejects(inSpan('failing', {}, async () => Promise.reject(new Error('boom'))));
    span!.end();
  });
  const byName = new Map(spans.map((s) => [s.name, s]));
  assert.equal(byName.get('GET /x')?.parentSpanId, 'd'.repeat(16));
  assert.equal(byName.get('outer')?.parentSpanId, byName.get('GET /x')?.spanId);
  assert.equal(byName.get('inner')?.parentSpanId, byName.get('outer')?.spanId);
  assert.equal(byName.get('failing')?.error, 'boom');
  assert.ok(spans.every((s) => s.traceId === 'c'.repeat(32) && s.endNs >= s.startNs));
  await tracer.serve('GET /y', { traceparent: `00-${'c'.repeat(32)}-${'d'.repeat(16)}-00` }, async (span) => assert.equal(span, null, 'not sampled'));
});

test("a span another process reports is taken only well-formed, and held within the call's own time", async () => {
  const { tracer, spans } = collecting();
  await tracer.serve('POST /exec', {}, async (span) => {
    for (const bad of ['', 'zz;1;2', `${'a'.repeat(16)};5;4`, `${'a'.repeat(16)};1;${'9'.repeat(30)}`])
      recordReportedSpan(span!, 'space-agent', 'bad', bad, 10n, 20n);
    recordReportedSpan(span!, 'space-agent', 'POST /exec', `${'a'.repeat(16)};1;99`, 10n, 20n);
  });
  assert.deepEqual(
    spans.map((s) => [s.name, s.service, s.startNs, s.endNs, s.spanId]),
    [['POST /exec', 'space-agent', 10n, 20n, 'a'.repeat(16)]],
  );
});

test('OTLP/JSON: a resource per service, hex ids, times as decimal strings, typed attributes, error status', () => {
  const span = (service: string, error: string | null): FinishedSpan => ({
    service,
    traceId: 'a'.repeat(32),
    spanId: 'b'.repeat(16),
    parentSpanId: null,
    name: 'n',
    kind: 'server',
    startNs: 1_700_000_000_000_000_001n,
    endNs: 1_700_000_000_000_000_002n,
    attributes: { s: 'x', i: 3, f: 0.5, b: true },
    error,
  });
  const body = otlpTraces([span('cp', null), span('node', 'failed'), span('cp', null)]) as {
    resourceSpans: { resource: { attributes: unknown[] }; scopeSpans: { spans: Record<string, unknown>[] }[] }[];
  };
  assert.equal(body.resourceSpans.length, 2);
  const [first] = body.resourceSpans[0]!.scopeSpans[0]!.spans;
  assert.deepEqual(body.resourceSpans[0]!.resource.attributes, [{ key: 'service.name', value: { stringValue: 'cp' } }]);
  assert.equal(body.resourceSpans[0]!.scopeSpans[0]!.spans.length, 2);
  assert.equal(first!.startTimeUnixNano, '1700000000000000001');
  assert.equal(first!.parentSpanId, undefined);
  assert.deepEqual(first!.attributes, [
    { key: 's', value: { stringValue: 'x' } },
    { key: 'i', value: { intValue: '3' } },
    { key: 'f', value: { doubleValue: 0.5 } },
    { key: 'b', value: { boolValue: true } },
  ]);
  assert.deepEqual(body.resourceSpans[1]!.scopeSpans[0]!.spans[0]!.status, { code: 2, message: 'failed' });
});
