import type { HandlerContext } from '@connectrpc/connect';
import type { SessionHandle } from '@space/sdk';
import { toConnectError } from '../errors.js';
import { type SpaceFor, accessTokenHeader, sandboxIdHeader, sandboxSession } from './sandbox-access.js';

/** `work`, with every failure as the Connect error an envd client reads. */
export async function asConnectErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw toConnectError(err);
  }
}

/** The session a Connect call names in its headers (a missing header: the Connect error for it). */
export function rpcSandbox(ctx: HandlerContext, spaceFor: SpaceFor): SessionHandle {
  try {
    return sandboxSession((name) => ctx.requestHeader.get(name), spaceFor);
  } catch (err) {
    throw toConnectError(err);
  }
}

/** The sandbox id and access token a Connect call carries: what state kept per caller (polling watchers) is keyed by. */
export function rpcCaller(ctx: HandlerContext): { sessionId: string; token: string } {
  return { sessionId: ctx.requestHeader.get(sandboxIdHeader) ?? '', token: ctx.requestHeader.get(accessTokenHeader) ?? '' };
}
