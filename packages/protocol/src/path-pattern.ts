/**
 * Matches `/processes/42/signal` against `/processes/:pid/signal`; returns the params or null. A
 * pattern ending in `/*` also matches any rest of the path (param `*`, without its leading `/`;
 * empty for the bare prefix with or without its trailing `/`).
 */
export function matchPath(pattern: string, path: string): Record<string, string> | null {
  const rest = pattern.endsWith('/*');
  const want = (rest ? pattern.slice(0, -2) : pattern).split('/');
  const got = path.split('/');
  if (rest ? got.length < want.length : want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    if (w.startsWith(':')) {
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(g)) return null;
      params[w.slice(1)] = g;
    } else if (w !== g) {
      return null;
    }
  }
  if (rest) params['*'] = got.slice(want.length).join('/');
  return params;
}

/** What `findRoute` found: the route with its params, a path served only for other methods, or nothing. */
export type RouteMatch<R> = { route: R; params: Record<string, string> } | { methodMismatch: true } | null;

/**
 * The route of a table that serves `method` on `path`: every dispatcher (the server-kit router,
 * the E2B adapter, the sandbox operations) answers 404 on null and 405 on `methodMismatch` from it.
 */
export function findRoute<R extends { method: string; path: string }>(routes: readonly R[], method: string, path: string): RouteMatch<R> {
  let pathMatched = false;
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (!params) continue;
    pathMatched = true;
    if (route.method === method) return { route, params };
  }
  return pathMatched ? { methodMismatch: true } : null;
}
