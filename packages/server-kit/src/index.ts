export { sendJson, sendError, toSpaceError } from './respond.js';
export { readBody, readJson, parseQuery, parseWith, describeIssues } from './body.js';
export { Router, type RequestContext, type UpgradeContext, type Handler, type SocketHandler, type UpgradeGuard } from './router.js';
export { bearerToken, secretsEqual } from './auth.js';
export { listen, closeServer } from './listen.js';
export { Upstream, readBounded } from './upstream.js';
export { relaySockets, holdMessages, type RelayOptions } from './socket-relay.js';
export { readRouteInput, forwardRoute, routePath, type HttpSandboxRoute } from './route-forwarding.js';
