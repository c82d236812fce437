import { AttachQuerySchema, ErrorCode, SpaceError, type SandboxRoute } from '@space/protocol';
import { parseQuery } from '@space/server-kit';

export interface StreamBinding {
  /** Rewrites messages from the node: `started` names the sandbox, a lost process says why. */
  rewrite: (message: unknown) => unknown;
}

type Message = { type?: unknown; code?: unknown };

/**
 * Ties a stream to the sandbox it runs on. Every `started` names the sandbox (`sandboxId`), which
 * a client sends back when it re-attaches (`?sandbox=`, with the process's `instance`). A
 * re-attach that lands on another sandbox of the session (the old one died and the session
 * resumed) reaches its process only if that sandbox was restored with it from a full checkpoint
 * (same instance); otherwise it ends with SANDBOX_DIED, never on another process that got the pid.
 * Throws SANDBOX_DIED at once for a re-attach from another sandbox that names no instance.
 */
export function bindStream(route: SandboxRoute, url: URL, params: Record<string, string>, sandboxId: string): StreamBinding {
  const query = route.path === '/processes/:pid/attach' ? (parseQuery(url, AttachQuerySchema) as { sandbox?: string; instance?: string }) : {};
  const from = query.sandbox !== undefined && query.sandbox !== sandboxId ? query.sandbox : null;
  const gone = `the sandbox this stream's process (pid ${params.pid}) ran on, ${from}, is gone; the session now runs on ${sandboxId}`;
  if (from && !query.instance)
    throw new SpaceError(ErrorCode.SANDBOX_DIED, `${gone}, and without the process's instance no process there can be told to be it`);
  return {
    rewrite: (message) => {
      const m = message as Message;
      if (m.type === 'started') return { ...(message as object), sandboxId };
      if (from && m.type === 'error' && m.code === ErrorCode.PROCESS_NOT_FOUND)
        return { type: 'error', code: ErrorCode.SANDBOX_DIED, message: `${gone}, which was not restored with it (no full checkpoint held it)` };
      return message;
    },
  };
}
