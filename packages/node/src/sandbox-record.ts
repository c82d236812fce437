import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { readJsonFile, replaceFile } from './json-file.js';

export const SandboxRecordSchema = z.object({
  sandboxId: z.string(),
  sessionId: z.string(),
  template: z.string(),
  startedAt: z.string(),
  token: z.string(),
  leaseIndex: z.number().int(),
  sandboxIp: z.string(),
  /** The full checkpoint the sandbox was restored from, or null when it booted fresh. */
  restoredFrom: z.string().nullable().optional(),
  /** What the start could not do as asked (a memory image it did not restore, and why). */
  note: z.string().nullable().optional(),
  /** The sandbox's own memory total (the session's memoryMb); its host cgroup allows more, as a backstop. */
  memoryMb: z.number().int().positive().optional(),
  /** The session's tenant, named in the node's usage measurements. */
  tenantId: z.string().optional(),
  /** Addresses of the sandboxes whose memory this one continues: its link holds them too (see MemoryImageMeta.addresses). */
  inheritedAddresses: z.array(z.string()).optional(),
});
export type SandboxRecord = z.infer<typeof SandboxRecordSchema>;

/** At most this many addresses go with a memory image, the most recent first (a socket older than that many restores is rare). */
export const maxImageAddresses = 16;

/** The addresses a memory image of this sandbox may hold in its sockets: its own, then those it inherited. */
export function imageAddressesOf(record: SandboxRecord): string[] {
  const inherited = (record.inheritedAddresses ?? []).filter((address) => address !== record.sandboxIp);
  return [record.sandboxIp, ...inherited].slice(0, maxImageAddresses);
}

/**
 * The node's own record of each sandbox it runs (a file per sandbox, mode 0600: it holds the daemon
 * token), so a restarted node agent finds its sandboxes again.
 */
export class SandboxRecords {
  constructor(readonly dir: string) {}

  workDir(sandboxId: string): string {
    return path.join(this.dir, sandboxId);
  }

  /** A new sandbox's record, in a directory of its own. */
  async save(record: SandboxRecord): Promise<void> {
    await mkdir(this.workDir(record.sandboxId), { recursive: true, mode: 0o700 });
    await this.rewrite(record);
  }

  /**
   * A saved record written again (a claim's), whole or not at all: a node agent killed midway finds
   * the old one or the new one at its restart, never an empty file (which it would take for a dead
   * sandbox's and remove).
   */
  async rewrite(record: SandboxRecord): Promise<void> {
    await replaceFile(path.join(this.workDir(record.sandboxId), 'record.json'), JSON.stringify(record));
  }

  async loadAll(): Promise<{ records: SandboxRecord[]; orphanDirs: string[] }> {
    await mkdir(this.dir, { recursive: true });
    const records: SandboxRecord[] = [];
    const orphanDirs: string[] = [];
    for (const name of await readdir(this.dir)) {
      const record = await readJsonFile(path.join(this.dir, name, 'record.json'), SandboxRecordSchema);
      if (record) records.push(record);
      else orphanDirs.push(name);
    }
    return { records, orphanDirs };
  }

  async remove(sandboxId: string): Promise<void> {
    await rm(this.workDir(sandboxId), { recursive: true, force: true });
  }
}
