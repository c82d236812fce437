import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isSpaceApiError } from '@space/sdk';
import { z } from 'zod';

/** What every tool takes to name its session. */
export const sessionId = z.string().min(1).max(64).describe('the session id (ses_…)');

export function ok(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }] };
}

/** A SPACE error becomes a tool error that names its code, so the model can act on it. */
export async function run(work: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await work();
  } catch (err) {
    const text = isSpaceApiError(err) ? `${err.code}: ${err.message}` : (err as Error).message;
    return { isError: true, content: [{ type: 'text', text }] };
  }
}
