import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Api } from './client.js';
import { OtlpReceiver, type ReceivedSpan } from './harness/otlp-receiver.js';
import { platformForSuite } from './suite-platform.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The chain of spans from `span` up to the root of what the receiver has of its trace. */
function ancestry(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const chain = [span];
  for (let parent = byId.get(span.parentSpanId ?? ''); parent; parent = byId.get(parent.parentSpanId ?? '')) chain.push(parent);
  return chain;
}

/** OpenTelemetry traces of a real platform, exported by OTLP to a receiver on loopback. */
describe('OpenTelemetry traces', () => {
  const receiver = new OtlpReceiver();
  let api: Api;
  const sessions: string[] = [];
  let sessionId = '';
  before(() => receiver.start());
  after(() => receiver.stop());
  platformForSuite(sessions, (_, a) => (api = a), { lateEnv: () => ({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }) });

  before(async () => {
    sessionId = (await api.createSession({ template: 'tiny' })).id;
    sessions.push(sessionId);
  });

  test("one exec's trace holds spans of the control plane, the node agent and the in-sandbox agent, each parented by the layer above", {
    timeout: 120_000,
  }, async (t) => {
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');
    const reply = await api.call(
      'POST',
      `/v1/sessions/${sessionId}/exec`,
      { cmd: ['echo', 'traced'] },
      { headers: { traceparent: `00-${traceId}-${callerSpan}-01` } },
    );
    assert.equal(reply.body.stdout, 'traced\n');
    const find = (service: string, name: string) => receiver.trace(traceId).find((s) => s.service === service && s.name === name);
    for (let i = 0; i < 100 && !(find('space-control-plane', 'POST /v1/sessions/:sessionId/exec') && find('space-agent', 'POST /exec')); i++) await sleep(100);
    // Spans are sent a second at a time by each process: whatever ended with the call is there a little after.
    await sleep(1500);
    const spans = receiver.trace(traceId);
    const cp = find('space-control-plane', 'POST /v1/sessions/:sessionId/exec');
    const node = find('space-node', 'POST /node/v1/sandboxes/:sandboxId/exec');
    const agent = find('space-agent', 'POST /exec');
    assert.ok(cp && node && agent, `spans of all three layers: ${spans.map((s) => `${s.service} ${s.name}`).join(', ')}`);
    assert.equal(cp.parentSpanId, callerSpan, "the control plane's span continues the caller's traceparent");
    assert.equal(cp.kind, 2);
    assert.equal(cp.attributes['http.response.status_code'], '200');
    assert.ok(ancestry(spans, node).includes(cp), "the node agent's span is under the control plane's");
    assert.equal(
      agent.parentSpanId !== null && spans.find((s) => s.spanId === agent.parentSpanId)?.service,
      'space-node',
      "the agent's span is a child of the node's",
    );
    assert.ok(ancestry(spans, agent).includes(node));
    for (const [inner, outer] of [
      [node, cp],
      [agent, node],
    ] as const)
      assert.ok(inner.startNs >= outer.startNs && inner.endNs <= outer.endNs, `${inner.name} within ${outer.name}`);
    // The store's statements of the call, under its span.
    const queries = spans.filter((s) => s.service === 'space-control-plane' && /^(SELECT|INSERT|UPDATE|DELETE)\b/.test(s.name));
    assert.ok(queries.length > 0 && queries.every((q) => ancestry(spans, q).includes(cp)), 'store queries under the call');
    assert.ok(typeof queries[0]!.attributes['db.query.text'] === 'string');
    // Every span of the trace hangs from another of it, or from the caller's.
    for (const span of spans)
      assert.ok(span.parentSpanId === callerSpan || spans.some((s) => s.spanId === span.parentSpanId), `${span.service} ${span.name} has its parent`);
    assert.deepEqual(receiver.refused, []);
    const tree = (span: ReceivedSpan, depth: number): string[] => [
      `${'  '.repeat(depth)}${span.service} ${span.name} ${Number(span.endNs - span.startNs) / 1e6} ms`,
      ...spans.filter((s) => s.parentSpanId === span.spanId).flatMap((s) => tree(s, depth + 1)),
    ];
    t.diagnostic(tree(cp, 0).join('\n'));
  });

  test('a checkpoint is traced through its phases and runsc; a caller that says not to sample gets no trace; a call without a traceparent starts one', {
    timeout: 120_000,
  }, async () => {
    const traceId = randomBytes(16).toString('hex');
    const reply = await api.call(
      'POST',
      `/v1/sessions/${sessionId}/checkpoints`,
      { kind: 'full' },
      { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } },
    );
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    const names = () => new Set(receiver.trace(traceId).map((s) => s.name));
    for (let i = 0; i < 100 && !names().has('runsc checkpoint'); i++) await sleep(100);
    await sleep(1500);
    for (const name of [
      'POST /v1/sessions/:sessionId/checkpoints',
      'lifecycle lease',
      'POST /node/v1/volumes/:sessionId/checkpoints',
      'runsc checkpoint',
      'memory saved',
      'snapshot',
      'resumed',
    ])
      assert.ok(names().has(name), `${name} in ${[...names()].join(', ')}`);

    const unsampled = randomBytes(16).toString('hex');
    await api.call(
      'POST',
      `/v1/sessions/${sessionId}/exec`,
      { cmd: ['true'] },
      { headers: { traceparent: `00-${unsampled}-${randomBytes(8).toString('hex')}-00` } },
    );
    const before = receiver.spans.length;
    await api.call('POST', `/v1/sessions/${sessionId}/exec`, { cmd: ['true'] });
    await sleep(2500);
    assert.deepEqual(receiver.trace(unsampled), []);
    const started = receiver.spans.slice(before).find((s) => s.name === 'POST /v1/sessions/:sessionId/exec' && s.parentSpanId === null);
    assert.ok(started, 'a new trace rooted at the control plane');
    assert.ok(receiver.trace(started.traceId).some((s) => s.service === 'space-agent'));
  });
});
