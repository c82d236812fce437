import { resolveOptions, type CallOptions, type SpaceOptions } from './options.js';
import { Session } from './session.js';
import { Transport } from './transport.js';
import type { CreateSessionOptions, SessionData } from './types.js';

/**
 * The SPACE client: `new Space({ apiUrl, apiKey })`, both defaulting to `SPACE_API_URL` and
 * `SPACE_API_KEY`.
 */
export class Space {
  readonly sessions: {
    create(options?: CreateSessionOptions & CallOptions): Promise<Session>;
    list(options?: CallOptions): Promise<Session[]>;
    get(id: string, options?: CallOptions): Promise<Session>;
  };
  readonly checkpoints: {
    /** `count` new sessions from a checkpoint, each with a parent link. */
    fork(checkpointId: string, options?: { count?: number } & CallOptions): Promise<Session[]>;
  };

  constructor(options: SpaceOptions = {}) {
    const t = new Transport(resolveOptions(options, process.env));
    this.sessions = {
      async create(opts = {}) {
        const { signal, timeoutMs, ...body } = opts;
        return new Session(t, await t.json<SessionData>('POST', '/v1/sessions', { signal, timeoutMs, json: body }));
      },
      async list(opts = {}) {
        return (await t.json<{ sessions: SessionData[] }>('GET', '/v1/sessions', opts)).sessions.map((d) => new Session(t, d));
      },
      async get(id, opts = {}) {
        return new Session(t, await t.json<SessionData>('GET', `/v1/sessions/${encodeURIComponent(id)}`, opts));
      },
    };
    this.checkpoints = {
      async fork(checkpointId, opts = {}) {
        const { count, ...call } = opts;
        const reply = await t.json<{ sessions: SessionData[] }>('POST', `/v1/checkpoints/${encodeURIComponent(checkpointId)}/fork`, { ...call, json: { count: count ?? 1 } });
        return reply.sessions.map((d) => new Session(t, d));
      },
    };
  }
}
