import { ErrorCode, type Service, type Session, SpaceError } from '@space/protocol';
import type { Caller } from '../tenants/auth.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SessionService } from './session-service.js';
import type { Store } from '../store/store.js';

/** Most services a session may declare. */
const maxServices = 16;

/**
 * A session's services: declared at create or here, started by the node in every new sandbox that
 * did not restore the session's processes. A change applies at once to a running sandbox too (the
 * service is started, replaced or stopped there); a session without one is not resumed for it.
 */
export class SessionServices {
  constructor(
    private readonly sessions: SessionService,
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
  ) {}

  async put(caller: Caller, sessionId: string, service: Service): Promise<Session> {
    await this.sessions.inTurn(caller, sessionId, 'services', async (row) => {
      const others = row.services.filter((s) => s.name !== service.name);
      if (others.length >= maxServices) throw new SpaceError(ErrorCode.QUOTA_EXCEEDED, `a session may have ${maxServices} services`);
      await this.store.updateSession(row.id, { services: [...others, service] });
      if (!row.sandboxId || row.status !== 'running') return;
      const node = await this.nodes.forSandbox(row);
      await node.stopService(row.sandboxId, service.name);
      await node.startService(row.sandboxId, service);
    });
    return this.sessions.get(caller, sessionId);
  }

  async remove(caller: Caller, sessionId: string, name: string): Promise<Session> {
    await this.sessions.inTurn(caller, sessionId, 'services', async (row) => {
      if (!row.services.some((s) => s.name === name))
        throw new SpaceError(ErrorCode.VALIDATION_FAILED, `session ${row.id} has no service ${JSON.stringify(name)}`);
      await this.store.updateSession(row.id, { services: row.services.filter((s) => s.name !== name) });
      if (row.sandboxId && row.status === 'running') await (await this.nodes.forSandbox(row)).stopService(row.sandboxId, name);
    });
    return this.sessions.get(caller, sessionId);
  }
}
