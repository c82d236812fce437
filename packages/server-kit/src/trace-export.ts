import { OtlpExporter } from './otlp-exporter.js';
import { Tracer } from './tracing.js';

/** A process's tracer and its exporter, when traces are exported. */
export interface Tracing {
  tracer: Tracer;
  exporter: OtlpExporter;
}

/** Where traces go, from OpenTelemetry's variables (the shared settings); null: nowhere, nothing is traced. */
export function otlpTracesUrl(settings: { otlpEndpoint: string | undefined; otlpTracesEndpoint: string | undefined }): string | null {
  return settings.otlpTracesEndpoint ?? (settings.otlpEndpoint ? `${settings.otlpEndpoint.replace(/\/$/, '')}/v1/traces` : null);
}

/** The process's tracing, exporting to `url` (started); none without one, so a process makes no spans at all. */
export function startTracing(url: string | null, service: string, log: (message: string) => void): Tracing | null {
  if (!url) return null;
  const exporter = new OtlpExporter({ url, log });
  exporter.start();
  return { tracer: new Tracer(service, exporter), exporter };
}
