import type { Logger } from '../logger.js';
import type { SandboxNetwork } from '../network/sandbox-network.js';
import type { RuntimeDriver } from '../runtime/driver.js';
import type { SandboxRecords } from '../sandbox-record.js';
import { daemonAnswers, type DaemonLink } from './daemon-link.js';
import { isUnclaimed, type LiveSandboxes } from './live-sandboxes.js';
import type { SandboxBooter } from './sandbox-booter.js';
import type { SessionVolumes } from './session-volumes.js';
import { InboundConnections } from './inbound-connections.js';
import { SandboxEntries } from './sandbox-entries.js';

export interface ReconcileDeps {
  records: SandboxRecords;
  driver: RuntimeDriver;
  network: SandboxNetwork;
  link: DaemonLink;
  booter: SandboxBooter;
  volumes: SessionVolumes;
  live: LiveSandboxes;
  log: Logger;
}

/**
 * Brings the node's records, the runtime, the network and the volumes into agreement after a
 * restart or crash: sandboxes still running with a reachable daemon are adopted into `live`,
 * everything else is removed.
 */
export async function reconcileSandboxes(deps: ReconcileDeps): Promise<{ adopted: number; removed: number }> {
  const { records, orphanDirs } = await deps.records.loadAll();
  let adopted = 0;
  let removed = 0;
  for (const record of records) {
    const daemon = deps.link.connect(record.sandboxId, record.sandboxIp, record.token);
    const stats = await deps.driver.stats(record.sandboxId);
    // Pooled sandboxes of the previous run are not adopted: the new pool boots its own.
    if (!isUnclaimed(record) && stats.running && (await daemonAnswers(daemon, 2000)) === true) {
      deps.live.add({ record, daemon, inbound: new InboundConnections(), pid: stats.pid, pendingCall: null, callsInFlight: 0, entries: new SandboxEntries() });
      await deps.network.refreshRules(record.sandboxId, record.sandboxIp);
      adopted++;
    } else {
      daemon.close();
      await deps.booter.teardown(record);
      removed++;
    }
  }
  const known = new Set(records.map((r) => r.sandboxId));
  for (const id of await deps.driver.list()) {
    if (!known.has(id)) {
      await deps.driver.destroy(id);
      removed++;
    }
  }
  for (const dir of orphanDirs) {
    await deps.network.destroy(dir, null);
    await deps.records.remove(dir);
  }
  removed += await deps.volumes.removeLeftovers();
  return { adopted, removed };
}
