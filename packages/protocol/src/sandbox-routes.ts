import { z } from 'zod';
import { AttachQuerySchema, BackgroundStartedSchema, ExecRequestSchema, ExecResultSchema, ProcessListSchema, SignalRequestSchema } from './exec.js';
import { OkSchema as ok } from './common.js';
import { FileListSchema, FileStatSchema, MkdirRequestSchema, MoveRequestSchema, PathQuerySchema, RemoveQuerySchema } from './files.js';
import type { EventStream } from './event-stream.js';
import { type RouteMatch, findRoute } from './path-pattern.js';
import {
  CodeContextListSchema,
  CodeContextParamsSchema,
  CodeContextSchema,
  CodeHistorySchema,
  codeEventStream,
  CreateCodeContextRequestSchema,
  RunCodeRequestSchema,
} from './code.js';
import {
  DesktopCursorSchema,
  DesktopInputSchema,
  DesktopLaunchRequestSchema,
  DesktopLaunchedSchema,
  DesktopStateSchema,
  DesktopVncRequestSchema,
  DesktopVncSchema,
  DesktopWindowListSchema,
  ScreenshotQuerySchema,
  maxScreenshotBytes,
} from './desktop.js';

/**
 * The sandbox operations: served by the daemon, relayed unchanged in shape by the node agent
 * (`/node/v1/sandboxes/:sandboxId/<path>`) and the control plane (`/v1/sessions/:id/<path>`).
 * Each side validates what it receives against this one table.
 */
export type SandboxRoute =
  | {
      kind: 'json';
      method: 'GET' | 'POST' | 'DELETE';
      path: string;
      params?: z.ZodTypeAny;
      body?: z.ZodTypeAny;
      query?: z.ZodTypeAny;
      response: z.ZodTypeAny;
      /**
       * Its work grows with what it is given (a tree removed or copied, a kernel or an application
       * started, text typed): the node does not bound its answer as it bounds the others'.
       */
      unbounded?: true;
    }
  /** A JSON request answered by a stream of JSON lines (`application/x-ndjson`), each checked against `stream.event` and bounded. */
  | { kind: 'events'; method: 'POST'; path: string; body: z.ZodTypeAny; stream: EventStream }
  /** Bytes as they come (a file), or of one `contentType` and at most `maxBytes` (a screenshot). */
  | { kind: 'download'; method: 'GET'; path: string; query: z.ZodTypeAny; contentType?: string; maxBytes?: number }
  | { kind: 'upload'; method: 'PUT'; path: string; query: z.ZodTypeAny; response: z.ZodTypeAny }
  | { kind: 'websocket'; method: 'GET'; path: string; query?: z.ZodTypeAny };

const execResponse = z.union([ExecResultSchema, BackgroundStartedSchema]);

export const sandboxRoutes: readonly SandboxRoute[] = [
  { kind: 'json', method: 'POST', path: '/exec', body: ExecRequestSchema, response: execResponse },
  { kind: 'websocket', method: 'GET', path: '/exec/stream' },
  { kind: 'websocket', method: 'GET', path: '/pty' },
  { kind: 'json', method: 'GET', path: '/processes', response: ProcessListSchema },
  { kind: 'json', method: 'POST', path: '/processes/:pid/signal', body: SignalRequestSchema, response: ok },
  { kind: 'websocket', method: 'GET', path: '/processes/:pid/attach', query: AttachQuerySchema },
  { kind: 'download', method: 'GET', path: '/files', query: PathQuerySchema },
  { kind: 'upload', method: 'PUT', path: '/files', query: PathQuerySchema, response: FileStatSchema },
  { kind: 'json', method: 'DELETE', path: '/files', query: RemoveQuerySchema, response: ok, unbounded: true },
  { kind: 'json', method: 'GET', path: '/files/list', query: PathQuerySchema, response: FileListSchema },
  { kind: 'json', method: 'GET', path: '/files/stat', query: PathQuerySchema, response: FileStatSchema },
  { kind: 'json', method: 'POST', path: '/files/mkdir', body: MkdirRequestSchema, response: ok },
  { kind: 'json', method: 'POST', path: '/files/move', body: MoveRequestSchema, response: ok, unbounded: true },
  { kind: 'websocket', method: 'GET', path: '/files/watch', query: PathQuerySchema },
  { kind: 'json', method: 'GET', path: '/code/contexts', response: CodeContextListSchema },
  { kind: 'json', method: 'POST', path: '/code/contexts', body: CreateCodeContextRequestSchema, response: CodeContextSchema, unbounded: true },
  { kind: 'json', method: 'GET', path: '/code/contexts/:contextId', params: CodeContextParamsSchema, response: CodeContextSchema },
  { kind: 'json', method: 'DELETE', path: '/code/contexts/:contextId', params: CodeContextParamsSchema, response: ok },
  {
    kind: 'json',
    method: 'POST',
    path: '/code/contexts/:contextId/restart',
    params: CodeContextParamsSchema,
    response: CodeContextSchema,
    unbounded: true,
  },
  { kind: 'json', method: 'GET', path: '/code/contexts/:contextId/history', params: CodeContextParamsSchema, response: CodeHistorySchema },
  { kind: 'events', method: 'POST', path: '/code/run', body: RunCodeRequestSchema, stream: codeEventStream },
  { kind: 'json', method: 'GET', path: '/desktop/state', response: DesktopStateSchema },
  { kind: 'download', method: 'GET', path: '/desktop/screenshot', query: ScreenshotQuerySchema, contentType: 'image/png', maxBytes: maxScreenshotBytes },
  { kind: 'json', method: 'POST', path: '/desktop/input', body: DesktopInputSchema, response: ok, unbounded: true },
  { kind: 'json', method: 'POST', path: '/desktop/launch', body: DesktopLaunchRequestSchema, response: DesktopLaunchedSchema, unbounded: true },
  { kind: 'json', method: 'GET', path: '/desktop/windows', response: DesktopWindowListSchema },
  { kind: 'json', method: 'GET', path: '/desktop/cursor', response: DesktopCursorSchema },
  { kind: 'json', method: 'POST', path: '/desktop/vnc', body: DesktopVncRequestSchema, response: DesktopVncSchema },
];

export function findSandboxRoute(method: string, path: string): RouteMatch<SandboxRoute> {
  return findRoute(sandboxRoutes, method, path);
}
