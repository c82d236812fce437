import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as an OpenTelemetry collector received it, with its resource's service name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  status: { code: number; message?: string };
}

interface OtlpJson {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: {
      spans: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        startTimeUnixNano: string;
        endTimeUnixNano: string;
        attributes: { key: string; value: Record<string, unknown> }[];
        status: { code: number; message?: string };
      }[];
    }[];
  }[];
}

/** An OTLP/HTTP (JSON) trace receiver on loopback, as an OpenTelemetry collector's: keeps every span posted to `/v1/traces`. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Requests that were not OTLP/JSON traces. */
  readonly refused: string[] = [];
  private server: Server | null = null;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        try {
          if (req.method !== 'POST' || req.url !== '/v1/traces' || req.headers['content-type'] !== 'application/json')
            throw new Error(`${req.method} ${req.url}`);
          this.take(JSON.parse(Buffer.concat(chunks).toString()) as OtlpJson);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } catch (err) {
          this.refused.push((err as Error).message);
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  private take(body: OtlpJson): void {
    for (const resource of body.resourceSpans) {
      const service = resource.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
      for (const scope of resource.scopeSpans)
        for (const s of scope.spans)
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? null,
            name: s.name,
            kind: s.kind,
            startNs: BigInt(s.startTimeUnixNano),
            endNs: BigInt(s.endTimeUnixNano),
            attributes: Object.fromEntries(s.attributes.map((a) => [a.key, Object.values(a.value)[0]])),
            status: s.status,
          });
    }
  }
}
