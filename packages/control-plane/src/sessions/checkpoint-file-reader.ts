import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import {
  type CheckpointDiff,
  ErrorCode,
  type FileDiff,
  type FileList,
  type FileStat,
  type NodePathVersionsSchema,
  type PathChange,
  type PathHistory,
  liveDiffTarget,
  SandboxLayout,
  isSpaceError,
  maxTextDiffBytes,
} from '@space/protocol';
import { chunksOf } from '@space/server-kit';
import { unifiedDiff } from '../checkpoints/unified-diff.js';
import type { z } from 'zod';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { CheckpointShipper } from '../checkpoints/checkpoint-shipper.js';
import type { SessionCheckpointService } from './session-checkpoint-service.js';
import type { SessionService } from './session-service.js';
import type { CheckpointRow, Store } from '../store/store.js';
import type { Caller } from '../tenants/auth.js';

type NodeVersion = z.infer<typeof NodePathVersionsSchema>['versions'][number];

/** The most changed lines a file diff shows; past it the files differ too much to show (`unified: null`). */
const maxDiffEdits = 1000;

/** The most checkpoints one request to a node asks about (the node route's bound). */
const versionsPerRequest = 1000;

export interface CheckpointFileReaderDeps {
  store: Store;
  nodes: NodeDirectory;
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  shipper: CheckpointShipper;
}

/**
 * A checkpoint's files read where the checkpoint is, without starting a sandbox: its node resolves
 * every path inside the checkpoint (storage/checkpoint-files.ts on the node); when that node is
 * lost, a live one fetches the checkpoint from the object store first. A relative path is taken
 * from the session's working directory, as the session's own files API takes it.
 */
export class CheckpointFileReader {
  constructor(private readonly deps: CheckpointFileReaderDeps) {}

  async stat(caller: Caller, checkpointId: string, requested: string): Promise<FileStat> {
    const { node, path } = await this.locate(await this.deps.checkpoints.checkpoint(caller, checkpointId), requested);
    return node.checkpointFileStat(checkpointId, path);
  }

  async list(caller: Caller, checkpointId: string, requested: string): Promise<FileList> {
    const { node, path } = await this.locate(await this.deps.checkpoints.checkpoint(caller, checkpointId), requested);
    return node.checkpointFileList(checkpointId, path);
  }

  /** Sends the file's bytes to `res`. */
  async download(caller: Caller, checkpointId: string, requested: string, res: ServerResponse): Promise<void> {
    const { node, path } = await this.locate(await this.deps.checkpoints.checkpoint(caller, checkpointId), requested);
    await node.checkpointFile(checkpointId, path, res);
  }

  /**
   * One page of what differs from checkpoint `fromId` to `query.to`, two checkpoints of one lineage
   * (or `live`: see `pair`), worked out by one node holding both from btrfs's own change tracking:
   * `from`'s node, the other fetched there from the object store when it is elsewhere.
   */
  async diff(caller: Caller, fromId: string, query: { to: string; after?: string; limit?: number }): Promise<CheckpointDiff> {
    const [from, to] = await this.pair(caller, fromId, query.to);
    const node = await this.holder(from);
    await this.deps.shipper.bringTo(node, to);
    return node.checkpointDiff(from.id, { ...query, to: to.id });
  }

  /**
   * One file in two checkpoints of one lineage (or `live`): each side read where its checkpoint is
   * (hashed whole, kept only up to `maxTextDiffBytes`), and a unified diff when both are text within it.
   */
  async fileDiff(caller: Caller, fromId: string, query: { to: string; path: string }): Promise<FileDiff> {
    const [from, to] = await this.pair(caller, fromId, query.to);
    const before = await this.fileSide(from, query.path);
    const after = await this.fileSide(to, query.path);
    const filePath = after?.path ?? before?.path ?? query.path;
    const text = [before, after].every((side) => side === null || side.text !== null);
    const unified = text ? unifiedDiff(filePath, before?.text ?? '', after?.text ?? '', maxDiffEdits) : null;
    return {
      path: filePath,
      from: from.id,
      to: to.id,
      sizeBefore: before?.size ?? null,
      sizeAfter: after?.size ?? null,
      sha256Before: before?.sha256 ?? null,
      sha256After: after?.sha256 ?? null,
      text,
      unified,
    };
  }

  /**
   * The two checkpoints a diff compares. `live` is the session's files now: an fs checkpoint of
   * `from`'s session is taken (its writes flushed, as any checkpoint's) and named in the answer's
   * `to`, so the next pages compare the same point. It counts among the automatic checkpoints.
   */
  private async pair(caller: Caller, fromId: string, to: string): Promise<[CheckpointRow, CheckpointRow]> {
    if (to !== liveDiffTarget) return this.deps.checkpoints.ofOneLineage(caller, fromId, to);
    const from = await this.deps.checkpoints.checkpoint(caller, fromId);
    const now = await this.deps.checkpoints.create(caller, from.sessionId, 'fs', 'auto');
    return [from, await this.deps.checkpoints.checkpoint(caller, now.id)];
  }

  /** A file of a checkpoint: its size, its sha256, and its text when it is UTF-8 within the bound; null when the checkpoint has no such regular file. */
  private async fileSide(checkpoint: CheckpointRow, requested: string): Promise<{ path: string; size: number; sha256: string; text: string | null } | null> {
    const { node, path } = await this.locate(checkpoint, requested);
    const read = await node.checkpointFileStream(checkpoint.id, path).catch((err: unknown) => {
      if (isSpaceError(err) && (err.code === ErrorCode.FILE_NOT_FOUND || err.code === ErrorCode.NOT_A_DIRECTORY || err.code === ErrorCode.VALIDATION_FAILED))
        return null;
      throw err;
    });
    if (!read) return null;
    const hash = createHash('sha256');
    const kept: Buffer[] = [];
    let size = 0;
    for await (const chunk of read.stream as AsyncIterable<Buffer>) {
      hash.update(chunk);
      if (size <= maxTextDiffBytes) kept.push(chunk);
      size += chunk.length;
    }
    const bytes = Buffer.concat(kept);
    return { path, size, sha256: hash.digest('hex'), text: size <= maxTextDiffBytes ? utf8Text(bytes) : null };
  }

  /**
   * The path in each of the session's checkpoints, oldest first, with how it changed from the one
   * before: each node holding some of them is asked once for all of its own.
   */
  async history(caller: Caller, sessionId: string, requested: string): Promise<PathHistory> {
    const session = await this.deps.sessions.row(caller, sessionId);
    const absolute = absolutePath(requested, session.cwd);
    const checkpoints = await this.deps.store.listCheckpoints(session.id);
    const found = new Map<string, NodeVersion>();
    const byNode = new Map<string, CheckpointRow[]>();
    for (const checkpoint of checkpoints) {
      const held = byNode.get(checkpoint.nodeId);
      if (held) held.push(checkpoint);
      else byNode.set(checkpoint.nodeId, [checkpoint]);
    }
    await Promise.all(
      [...byNode].map(async ([nodeId, rows]) => {
        // A node that is lost or does not answer leaves its checkpoints `unknown`.
        if (await this.deps.nodes.isLost(nodeId)) return;
        const node = await this.deps.nodes.client(nodeId);
        for (const chunk of chunksOf(rows, versionsPerRequest)) {
          const ids = chunk.map((c) => c.id);
          for (const version of await node.pathVersions(ids, absolute).catch(() => [])) found.set(version.checkpointId, version);
        }
      }),
    );
    let before: NodeVersion | undefined;
    const versions = checkpoints.map((checkpoint) => {
      const now = found.get(checkpoint.id);
      const change = changeOf(before, now);
      if (now) before = now;
      return {
        checkpointId: checkpoint.id,
        createdAt: checkpoint.createdAt,
        kind: checkpoint.kind,
        change,
        type: now?.stat?.type ?? null,
        size: now?.stat?.size ?? null,
        mtime: now?.stat?.mtime ?? null,
        sha256: now?.sha256 ?? null,
      };
    });
    return { path: absolute, versions };
  }

  /** A node holding the checkpoint (read for the caller: of its tenant) and the path made absolute. */
  async locate(checkpoint: CheckpointRow, requested: string): Promise<{ node: NodeClient; path: string }> {
    const session = await this.deps.store.getSession(checkpoint.tenantId, checkpoint.sessionId);
    return { node: await this.holder(checkpoint), path: absolutePath(requested, session?.cwd ?? null) };
  }

  /**
   * The checkpoint's own node; when that node is lost, a live one that fetched it from the object
   * store (the session's volume node when it is live: a resume there fetched its newest checkpoint
   * already, else the least busy ready node). NODE_UNAVAILABLE when it was never shipped.
   */
  private async holder(checkpoint: CheckpointRow): Promise<NodeClient> {
    const { nodes } = this.deps;
    if (!(await nodes.isLost(checkpoint.nodeId))) return nodes.client(checkpoint.nodeId);
    const volumeNode = (await this.deps.store.getSession(checkpoint.tenantId, checkpoint.sessionId))?.volumeNodeId;
    const node = volumeNode && !(await nodes.isLost(volumeNode)) ? await nodes.client(volumeNode) : await nodes.place();
    await this.deps.shipper.bringTo(node, checkpoint);
    return node;
  }
}

/** A relative path from the session's working directory (the template's WORKDIR, else /workspace). */
export function absolutePath(requested: string, cwd: string | null): string {
  return requested.startsWith('/') ? requested : path.posix.join(cwd ?? SandboxLayout.workdir, requested);
}

/** The bytes as text when they are UTF-8 without NUL bytes (what a text diff can show), else null. */
function utf8Text(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** How a path changed between two checkpoints (`before`: the newest known one before; none for the first). */
function changeOf(before: NodeVersion | undefined, now: NodeVersion | undefined): PathChange {
  if (!now) return 'unknown';
  if (!now.stat) return before?.stat ? 'removed' : 'absent';
  if (!before?.stat) return 'added';
  const a = before.stat;
  const b = now.stat;
  const sameContent =
    a.type === b.type && a.size === b.size && a.target === b.target && (before.sha256 && now.sha256 ? before.sha256 === now.sha256 : a.mtime === b.mtime);
  return sameContent && a.mode === b.mode ? 'unchanged' : 'modified';
}
