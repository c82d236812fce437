export { sendJson, sendError, toSpaceError } from './respond.js';
export { readBody, readJson, parseQuery, parseWith, describeIssues } from './body.js';
export {
  Router,
  type ProxyRoute,
  type HostMatcher,
  type RouterOptions,
  type RequestContext,
  type UpgradeContext,
  type Handler,
  type SocketHandler,
  type UpgradeGuard,
  type ErrorShape,
} from './router.js';
export { bearerToken, secretsEqual } from './auth.js';
export { listen, closeServer, serverTlsOptions, type ConnectionBounds } from './listen.js';
export { lineLog, type ServerLog } from './server-log.js';
export { NoAnswer, Upstream } from './upstream.js';
export { clientTlsOptions, type ClientTls, type ServerTls } from './peer-tls.js';
export { readBounded, type BoundedReadOptions } from './bounded-read.js';
export { relaySockets, holdMessages, closeWithError, type RelayOptions } from './socket-relay.js';
export { daemonAnswerBoundMs, readRouteInput, forwardRoute, routePath, type HttpSandboxRoute } from './route-forwarding.js';
export { serveRoute, type RouteHandler, type ServeRoute } from './serve-route.js';
export { SingleFlight } from './single-flight.js';
export { WriteWindow } from './write-window.js';
export { eachAtMost } from './at-most.js';
export { chunksOf } from './chunks-of.js';
export { KeyedQueue, type QueueWait } from './keyed-queue.js';
export { CallDeadline } from './call-deadline.js';
export { writeFreshFile } from './fresh-file.js';
export { freePort } from './free-port.js';
export { processAlive } from './process-alive.js';
export { type ChildExit, hasExited, signalAndWait } from './child-exit.js';
export { StopSteps } from './stop-steps.js';
export { warnWhileWaiting } from './still-waiting.js';
export { makeTestCertificates, makeTestClientCertificate, signTestCertificateRequest, subjectAltNames, type TestCertificates } from './test-certificates.js';
export { resetAgentSockets } from './agent-sockets.js';
export { proxyRequest, proxyUpgrade, waitForListener, type ProxyTarget } from './http-proxy.js';
export { setting, readSettings, SettingsError, type Setting, type SettingTable, type SettingValues } from './settings.js';
export { sharedSettings } from './shared-settings.js';
export {
  Tracer,
  Span,
  activeSpan,
  untraced,
  inSpan,
  parseTraceparent,
  recordReportedSpan,
  recordChildSpan,
  spanClockNs,
  type FinishedSpan,
  type SpanSink,
  type AttributeValue,
} from './tracing.js';
export { OtlpExporter, otlpTraces, type OtlpExporterOptions } from './otlp-exporter.js';
export { otlpTracesUrl, startTracing, type Tracing } from './trace-export.js';
