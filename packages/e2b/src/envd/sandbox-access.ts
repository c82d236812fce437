import type { SessionHandle, Space } from '@space/sdk';
import { E2bError } from '../errors.js';

/** The headers E2B's SDK names the sandbox and carries its access token in. */
export const sandboxIdHeader = 'e2b-sandbox-id';
export const accessTokenHeader = 'x-access-token';

/** A SPACE client acting with `key`: the caller's API key, or a sandbox's access token (a session token). */
export type SpaceFor = (key: string) => Space;

/**
 * The session an envd call is for: E2B's SDK names the sandbox in `E2b-Sandbox-Id` and carries its
 * access token in `X-Access-Token`. The token is a SPACE session token, so it reaches that
 * session's sandbox and nothing else, whoever presents it.
 */
export function sandboxSession(header: (name: string) => string | null | undefined, spaceFor: SpaceFor): SessionHandle {
  const id = header(sandboxIdHeader);
  if (!id) throw new E2bError(400, "missing the E2b-Sandbox-Id header: set E2B_SANDBOX_URL to this server's /e2b/sandbox");
  const token = header(accessTokenHeader);
  if (!token) throw new E2bError(401, 'missing the X-Access-Token header: the envdAccessToken the sandbox was created or connected with');
  return spaceFor(token).sessions.handle(id);
}
