import type { AttributeValue, FinishedSpan, SpanSink } from './tracing.js';

export interface OtlpExporterOptions {
  /** Where traces are posted: OTLP/HTTP with JSON encoding (`…/v1/traces`). */
  url: string;
  /** Told once when exports start failing, and once when they work again. */
  log: (message: string) => void;
  /** How often the spans gathered are sent. */
  everyMs?: number;
  /** Spans kept while the collector is slow or away; past it new ones are dropped (and counted). */
  maxQueued?: number;
  /** Spans per request. */
  maxBatch?: number;
}

const attribute = (key: string, value: AttributeValue) => ({
  key,
  value:
    typeof value === 'string'
      ? { stringValue: value }
      : typeof value === 'boolean'
        ? { boolValue: value }
        : Number.isInteger(value)
          ? { intValue: String(value) }
          : { doubleValue: value },
});

/** OTLP's span kinds: 1 internal, 2 server. */
const kinds = { internal: 1, server: 2 } as const;

/** The spans of a batch as OTLP/JSON: one resource per service, ids in hex, times as decimal strings. */
export function otlpTraces(spans: FinishedSpan[]): unknown {
  const byService = new Map<string, FinishedSpan[]>();
  for (const span of spans) byService.set(span.service, [...(byService.get(span.service) ?? []), span]);
  return {
    resourceSpans: [...byService].map(([service, list]) => ({
      resource: { attributes: [attribute('service.name', service)] },
      scopeSpans: [
        {
          scope: { name: 'space' },
          spans: list.map((s) => ({
            traceId: s.traceId,
            spanId: s.spanId,
            ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
            name: s.name,
            kind: kinds[s.kind],
            startTimeUnixNano: String(s.startNs),
            endTimeUnixNano: String(s.endNs),
            attributes: Object.entries(s.attributes).map(([k, v]) => attribute(k, v)),
            status: s.error === null ? { code: 1 } : { code: 2, message: s.error },
          })),
        },
      ],
    })),
  };
}

/**
 * Sends finished spans to an OpenTelemetry collector (OTLP over HTTP, JSON), a batch every
 * `everyMs`, in the background: a span costs the traced call only its push onto the queue. The
 * queue is bounded, a failed send is dropped (tracing never holds a call back nor grows without bound).
 */
export class OtlpExporter implements SpanSink {
  private queue: FinishedSpan[] = [];
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private failing = false;
  /** Spans dropped: the queue was full, or their batch failed. */
  dropped = 0;

  constructor(private readonly options: OtlpExporterOptions) {}

  add(span: FinishedSpan): void {
    if (this.queue.length >= (this.options.maxQueued ?? 8192)) {
      this.dropped++;
      return;
    }
    this.queue.push(span);
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.options.everyMs ?? 1000);
    this.timer.unref();
  }

  /** Sends what is queued now (one batch at a time). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    if (this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.options.maxBatch ?? 1024);
    this.sending = this.send(batch).finally(() => {
      this.sending = null;
    });
    await this.sending;
  }

  /** Stops the timer and sends what is left. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    while (this.queue.length > 0 && !this.failing) await this.flush();
  }

  private async send(batch: FinishedSpan[]): Promise<void> {
    try {
      const res = await fetch(this.options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(otlpTraces(batch)),
        signal: AbortSignal.timeout(5000),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (!res.ok) throw new Error(`${res.status} ${res.statusText}`);
      if (this.failing) this.options.log(`traces reach ${this.options.url} again`);
      this.failing = false;
    } catch (err) {
      this.dropped += batch.length;
      if (!this.failing) this.options.log(`traces not exported to ${this.options.url} (dropped until it answers): ${(err as Error).message}`);
      this.failing = true;
    }
  }
}
