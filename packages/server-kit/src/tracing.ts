import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * The span the current work runs in. This is the one store kept at module level: the trace
 * context, which follows a call through every await (as OpenTelemetry's own context manager keeps
 * it), so that code between a request and the calls it makes need not pass it along. What spans
 * are exported to, and how, lives in instances (`Tracer`, `OtlpExporter`).
 */
const context = new AsyncLocalStorage<Span>();

export type AttributeValue = string | number | boolean;
type SpanKind = 'internal' | 'server';

/** A span as it is exported: ids in hex, times in nanoseconds since the epoch. */
export interface FinishedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: SpanKind;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  /** Set when the work failed: its message. */
  error: string | null;
}

/** Where finished spans go (`OtlpExporter`). */
export interface SpanSink {
  add(span: FinishedSpan): void;
}

/** Now, in nanoseconds since the epoch (to a fraction of a microsecond), the clock every span is timed by. */
export const spanClockNs = (): bigint => BigInt(Math.round(performance.timeOrigin * 1000)) * 1000n + BigInt(Math.round(performance.now() * 1e6));
const newSpanId = (): string => randomBytes(8).toString('hex');
const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C traceparent's trace and parent span, or null for a missing or malformed one (or all zeros). */
export function parseTraceparent(header: string | string[] | undefined): { traceId: string; parentSpanId: string; sampled: boolean } | null {
  const match = typeof header === 'string' ? traceparentPattern.exec(header.trim()) : null;
  if (!match || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return null;
  return { traceId: match[1]!, parentSpanId: match[2]!, sampled: (Number.parseInt(match[3]!, 16) & 1) === 1 };
}

/** A piece of work being timed, in a trace; exported when it ends. */
export class Span {
  readonly spanId = newSpanId();
  private readonly startNs = spanClockNs();
  private ended = false;
  private error: string | null = null;

  constructor(
    readonly tracer: Tracer,
    readonly traceId: string,
    readonly parentSpanId: string | null,
    public name: string,
    private readonly kind: SpanKind,
    private readonly attributes: Record<string, AttributeValue> = {},
  ) {}

  /** The header that makes a call to the layer below continue this trace under this span. */
  get traceparent(): string {
    return `00-${this.traceId}-${this.spanId}-01`;
  }

  set(key: string, value: AttributeValue): void {
    this.attributes[key] = value;
  }

  fail(err: unknown): void {
    this.error = (err instanceof Error ? err.message : String(err)).slice(0, 500);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    const { traceId, spanId, parentSpanId, name, kind, startNs, attributes, error } = this;
    this.tracer.export({ service: this.tracer.service, traceId, spanId, parentSpanId, name, kind, startNs, endNs: spanClockNs(), attributes, error });
  }
}

/** Makes a process's spans (its `service`) and hands them to the sink. */
export class Tracer {
  constructor(
    readonly service: string,
    private readonly sink: SpanSink,
  ) {}

  /**
   * Runs a request's handling in a server span: the caller's trace when it sent a traceparent
   * (none when it says not to sample), a new one otherwise. The caller ends the span (when the
   * reply is done: a stream may outlive `work`).
   */
  serve<T>(name: string, headers: IncomingHttpHeaders, work: (span: Span | null) => Promise<T>): Promise<T> {
    const parent = parseTraceparent(headers.traceparent);
    if (parent && !parent.sampled) return work(null);
    const span = new Span(this, parent?.traceId ?? randomBytes(16).toString('hex'), parent?.parentSpanId ?? null, name, 'server');
    return context.run(span, () => work(span));
  }

  export(span: FinishedSpan): void {
    this.sink.add(span);
  }
}

/** Runs `work` outside any trace: background work a call starts but is not part of (a pool's refill). */
export function untraced<T>(work: () => T): T {
  return context.exit(work);
}

/** The span the current work runs in, if it is traced. */
export function activeSpan(): Span | undefined {
  return context.getStore();
}

/**
 * Runs `work` in a child span of the active one (a store query, a wait, a runsc command, a phase).
 * Outside a traced call (tracing off, or work no request started) it runs `work` alone: one lookup.
 */
export async function inSpan<T>(name: string, attributes: Record<string, AttributeValue>, work: () => Promise<T>): Promise<T> {
  const parent = context.getStore();
  if (!parent) return work();
  const span = new Span(parent.tracer, parent.traceId, parent.spanId, name, 'internal', attributes);
  try {
    return await context.run(span, work);
  } catch (err) {
    span.fail(err);
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Records a span another process measured and reported in its reply (the in-sandbox agent's, which
 * cannot reach a collector), as a child of `parent`: `<span id>;<start ns>;<end ns>`. It is hostile
 * input: malformed reports are ignored, and its times are held within `[sentNs, receivedNs]`.
 */
export function recordReportedSpan(parent: Span, service: string, name: string, report: string, sentNs: bigint, receivedNs: bigint): void {
  const match = /^([0-9a-f]{16});(\d{1,20});(\d{1,20})$/.exec(report);
  if (!match) return;
  const [reportedStart, reportedEnd] = [BigInt(match[2]!), BigInt(match[3]!)];
  if (reportedEnd < reportedStart) return;
  const clamp = (ns: bigint) => (ns < sentNs ? sentNs : ns > receivedNs ? receivedNs : ns);
  recordChildSpan(parent, name, clamp(reportedStart), clamp(reportedEnd), { service, spanId: match[1]!, kind: 'server' });
}

/** Records a span timed elsewhere (a phase a timer marked, a span another process reported) as a child of `parent`. */
export function recordChildSpan(
  parent: Span,
  name: string,
  startNs: bigint,
  endNs: bigint,
  { service = parent.tracer.service, spanId = newSpanId(), kind = 'internal' }: { service?: string; spanId?: string; kind?: SpanKind } = {},
): void {
  parent.tracer.export({ service, traceId: parent.traceId, spanId, parentSpanId: parent.spanId, name, kind, startNs, endNs, attributes: {}, error: null });
}
