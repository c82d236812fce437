import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import { ErrorCode, Limits, SpaceError } from '@space/protocol';
import { readBounded } from './bounded-read.js';

/** Reads a whole request body, refusing more than `limit` bytes. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    throw new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, `request body of ${declared} bytes exceeds the limit of ${limit}`);
  }
  return readBounded(req, limit, {
    overflow: () => new SpaceError(ErrorCode.PAYLOAD_TOO_LARGE, `request body exceeds the limit of ${limit} bytes`),
    interrupted: () => new SpaceError(ErrorCode.REQUEST_ABORTED, 'the client closed the connection before the request body was complete'),
    drain: true,
    idle: {
      ms: Limits.bodyIdleTimeoutMs,
      stalled: () => new SpaceError(ErrorCode.REQUEST_TIMEOUT, `no byte of the request body arrived for ${Limits.bodyIdleTimeoutMs / 1000} s`),
    },
  });
}

/** Formats zod issues as one readable line naming each offending field. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 10)
    .map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`)
    .join('; ');
}

const pathFields = new Set(['path', 'from', 'to', 'cwd']);

/** Validates a value; a bad sandbox path gets its own code (INVALID_PATH), anything else VALIDATION_FAILED. */
export function parseWith<S extends z.ZodTypeAny>(schema: S, value: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const onlyPaths = parsed.error.issues.every((issue) => pathFields.has(String(issue.path[issue.path.length - 1])));
  throw new SpaceError(onlyPaths ? ErrorCode.INVALID_PATH : ErrorCode.VALIDATION_FAILED, `invalid ${what}: ${describeIssues(parsed.error)}`);
}

/** Reads, parses and validates a JSON body. An empty body counts as `{}`. */
export async function readJson<S extends z.ZodTypeAny>(req: IncomingMessage, schema: S, limit: number = Limits.maxJsonBodyBytes): Promise<z.output<S>> {
  const raw = await readBody(req, limit);
  let value: unknown = {};
  if (raw.length > 0) {
    try {
      value = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw new SpaceError(ErrorCode.INVALID_JSON, `request body is not valid JSON: ${(err as Error).message}`);
    }
  }
  return parseWith(schema, value, 'request body');
}

export function parseQuery<S extends z.ZodTypeAny>(url: URL, schema: S): z.output<S> {
  return parseWith(schema, Object.fromEntries(url.searchParams), 'query');
}
