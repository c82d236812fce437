import type { z } from 'zod';

/**
 * One JSON operation of an internal API, declared once and read by both ends: the client builds
 * its request from it and checks the reply with `response`; the server registers it, checks the
 * params, body and query with their schemas and answers with `status`.
 */
export interface ApiRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  /** A schema per `:name` segment of `path` (a segment without one is still restricted by `matchPath`). */
  params?: Readonly<Record<string, z.ZodTypeAny>>;
  body?: z.ZodTypeAny;
  query?: z.ZodTypeAny;
  /**
   * `binary`: the body is raw bytes the handler streams itself (an image archive), not JSON.
   * `download`: the reply is raw bytes the handler writes itself (a file), not JSON.
   */
  transport?: 'binary' | 'download';
  status: 200 | 201;
  response: z.ZodTypeAny;
  /** How long a caller waits for the reply when not the client's default. */
  timeoutMs?: number;
  /** The largest reply taken, when not the JSON bound (`Limits.maxJsonBodyBytes`). */
  replyLimitBytes?: number;
}

type Params<R> = R extends { path: string } ? ParamNames<R['path']> : never;
type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;

/** What a caller gives a route: its path's params as strings, and the body and query it declares. */
export type RouteCall<R extends ApiRoute> = ([Params<R>] extends [never] ? unknown : { params: Record<Params<R>, string> }) &
  (R extends { body: infer B extends z.ZodTypeAny } ? { body: z.input<B> } : unknown) &
  (R extends { query: infer Q extends z.ZodTypeAny } ? { query: z.input<Q> } : unknown);

/** What a handler gets: the params (parsed where the route has their schema), body and query, checked. */
export type RouteInput<R extends ApiRoute> = {
  params: { [K in Params<R>]: R extends { params: { [P in K]: infer S extends z.ZodTypeAny } } ? z.output<S> : string };
} & (R extends { body: infer B extends z.ZodTypeAny } ? { body: z.output<B> } : unknown) &
  (R extends { query: infer Q extends z.ZodTypeAny } ? { query: z.output<Q> } : unknown);

/** What the route answers, as its response schema reads it. */
export type RouteReply<R extends ApiRoute> = z.output<R['response']>;

/** The route's path with its `:name` segments filled in (encoded) and the query appended. */
export function routeUrl(route: Pick<ApiRoute, 'path'>, params: Record<string, string> = {}, query?: Record<string, unknown>): string {
  const path = route.path.replace(/:([a-zA-Z]+)/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`${route.path}: no value for :${name}`);
    return encodeURIComponent(value);
  });
  const pairs = Object.entries(query ?? {}).filter(([, v]) => v !== undefined);
  return pairs.length ? `${path}?${new URLSearchParams(pairs.map(([k, v]) => [k, String(v)]))}` : path;
}
