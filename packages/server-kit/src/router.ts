import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { ErrorCode, Limits, SpaceError, matchPath } from '@space/protocol';
import { sendError } from './respond.js';

export interface RequestContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: Record<string, string>;
}

export interface UpgradeContext {
  req: IncomingMessage;
  url: URL;
  params: Record<string, string>;
}

export type Handler = (ctx: RequestContext) => Promise<void> | void;
export type SocketHandler = (ws: WebSocket, ctx: UpgradeContext) => void;
/** Runs before a WebSocket upgrade is accepted; throw a SpaceError to refuse it with that status. */
export type UpgradeGuard = (ctx: UpgradeContext) => Promise<void> | void;

interface HttpRoute {
  method: string;
  pattern: string;
  handler: Handler;
}

interface SocketRoute {
  pattern: string;
  guard: UpgradeGuard;
  handler: SocketHandler;
}

/** A small method + path router for node:http with WebSocket routes on the same server. */
export class Router {
  private readonly routes: HttpRoute[] = [];
  private readonly socketRoutes: SocketRoute[] = [];
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: Limits.maxStreamMessageBytes * 2 });

  on(method: string, pattern: string, handler: Handler): this {
    this.routes.push({ method, pattern, handler });
    return this;
  }

  socket(pattern: string, guard: UpgradeGuard, handler: SocketHandler): this {
    this.socketRoutes.push({ pattern, guard, handler });
    return this;
  }

  readonly handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://local');
    try {
      let pathMatched = false;
      for (const route of this.routes) {
        const params = matchPath(route.pattern, url.pathname);
        if (!params) continue;
        pathMatched = true;
        if (route.method !== req.method) continue;
        await route.handler({ req, res, url, params });
        return;
      }
      if (pathMatched) throw new SpaceError(ErrorCode.METHOD_NOT_ALLOWED, `${req.method} is not allowed on ${url.pathname}`);
      throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `no route for ${req.method} ${url.pathname}`);
    } catch (err) {
      sendError(res, err);
    }
  };

  readonly handleUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://local');
    socket.on('error', () => socket.destroy());
    try {
      for (const route of this.socketRoutes) {
        const params = matchPath(route.pattern, url.pathname);
        if (!params) continue;
        const ctx = { req, url, params };
        await route.guard(ctx);
        this.wss.handleUpgrade(req, socket, head, (ws) => route.handler(ws, ctx));
        return;
      }
      throw new SpaceError(ErrorCode.ROUTE_NOT_FOUND, `no WebSocket route for ${url.pathname}`);
    } catch (err) {
      rejectUpgrade(socket, err);
    }
  };
}

function rejectUpgrade(socket: Duplex, err: unknown): void {
  const e = err instanceof SpaceError ? err : new SpaceError(ErrorCode.INTERNAL, String(err));
  const body = JSON.stringify(e.toBody());
  socket.end(`HTTP/1.1 ${e.status} Error\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}
