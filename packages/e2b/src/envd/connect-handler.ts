import type { IncomingMessage, ServerResponse } from 'node:http';
import { Code, ConnectError, type ConnectRouter, type ConnectRouterOptions, createConnectRouter } from '@connectrpc/connect';
import { compressionGzip, universalRequestFromNodeRequest, universalResponseToNodeResponse } from '@connectrpc/connect-node';
import type { UniversalServerResponse } from '@connectrpc/connect/protocol';
import { asClientFault, isClientFault, withCorrectedEndStream } from './end-stream-errors.js';

/**
 * Two answers of connect-es that blame the server for the client's request are corrected, so no
 * client input yields a 5xx or an `internal` error: a body it could not decode (`internal`, 500; an
 * undecodable JSON body is `invalid_argument`, 400, and so is this one now; in a stream's end
 * message the same, see end-stream-errors.ts), and a procedure this service does not implement
 * (`unimplemented`, 501; 404 like an unknown path, the code unchanged).
 */
async function correctClientErrors(response: UniversalServerResponse): Promise<UniversalServerResponse> {
  if (response.body && Symbol.asyncIterator in response.body && /^application\/connect\+/.test(response.header?.get('content-type') ?? ''))
    return { ...response, body: withCorrectedEndStream(response.body) };
  if (
    (response.status !== 500 && response.status !== 501) ||
    response.header?.get('content-encoding') ||
    !response.body ||
    !(Symbol.asyncIterator in response.body)
  )
    return response;
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body) chunks.push(chunk);
  let error: { code?: string; message?: string } = {};
  try {
    error = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    // not a Connect error body: passed on as it was
  }
  const undecodable = isClientFault(error);
  const status = undecodable ? 400 : error.code === 'unimplemented' ? 404 : response.status;
  const body = undecodable ? Buffer.from(JSON.stringify(asClientFault(error))) : Buffer.concat(chunks);
  response.header?.set('content-length', String(body.byteLength));
  return {
    ...response,
    status,
    body: (async function* () {
      yield new Uint8Array(body);
    })(),
  };
}

/**
 * Serves Connect-RPC services under `prefix` on node:http (what connect-node's adapter does, with
 * the corrections above and errors of the handler itself logged rather than printed).
 */
export function connectHandler(
  options: ConnectRouterOptions & {
    prefix: string;
    routes: (router: ConnectRouter) => void;
    fallback: (req: IncomingMessage, res: ServerResponse) => void;
    log: (message: string) => void;
  },
): (req: IncomingMessage, res: ServerResponse) => void {
  const router = createConnectRouter({ acceptCompression: [compressionGzip], ...options });
  options.routes(router);
  const handlers = new Map(router.handlers.map((handler) => [options.prefix + handler.requestPath, handler]));
  return (req, res) => {
    const handler = handlers.get((req.url ?? '').split('?', 1)[0]!);
    if (!handler) return options.fallback(req, res);
    handler(universalRequestFromNodeRequest(req, res, undefined, undefined))
      .then(correctClientErrors)
      .then((response) => universalResponseToNodeResponse(response, res))
      .catch((err: Error) => {
        if (ConnectError.from(err).code === Code.Aborted) return; // the client went away
        options.log(`envd ${handler.service.typeName}/${handler.method.name}: ${err.message}`);
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
      });
  };
}
