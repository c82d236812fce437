import path from 'node:path';
import { ErrorCode, type FileStat, type PathRestoreResult, SpaceError } from '@space/protocol';
import { chunksOf } from '@space/server-kit';
import type { NodeClient } from '../cluster/node-client.js';
import type { SessionCalls } from './session-calls.js';
import type { SessionCheckpointService } from './session-checkpoint-service.js';
import type { SessionService } from './session-service.js';
import type { SessionRow } from '../store/store.js';
import type { Caller } from '../tenants/auth.js';
import { type CheckpointFileReader, absolutePath } from './checkpoint-file-reader.js';

/** The most files, directories and links one restore writes. */
export const maxRestoreEntries = 10_000;

/** Where a restore never writes: the kernel's file systems and the root itself. */
const systemRoots = ['/proc', '/sys', '/dev'];

/** chmod takes this many paths at a time. */
const chmodBatch = 100;

export interface PathRestorerDeps {
  sessions: SessionService;
  checkpoints: SessionCheckpointService;
  calls: SessionCalls;
  reader: CheckpointFileReader;
}

/**
 * Puts one file or directory as it was in a checkpoint back into the live session: read where the
 * checkpoint is (its node resolves every path inside it), written through the session's sandbox
 * as any upload is (each file renamed into place: a reader sees the old file or the new one, and
 * processes keep running), links made and modes set inside the sandbox. An fs checkpoint of the
 * session is taken first, so the restore itself can be undone. A directory is merged: what it
 * holds now and the checkpoint did not is left.
 */
export class PathRestorer {
  constructor(private readonly deps: PathRestorerDeps) {}

  async restore(caller: Caller, sessionId: string, request: { checkpointId: string; path: string; to?: string }): Promise<PathRestoreResult> {
    const session = await this.deps.sessions.row(caller, sessionId);
    const checkpoint = await this.deps.checkpoints.checkpointInLineage(caller, session, request.checkpointId);
    const target = absolutePath(request.to ?? request.path, session.cwd);
    refuseTarget(target, session);
    const { node: source, path: from } = await this.deps.reader.locate(checkpoint, request.path);
    // Missing in the checkpoint: refused before anything is taken or written.
    const top = await source.checkpointFileStat(checkpoint.id, from);
    const undo = await this.deps.checkpoints.create(caller, session.id, 'fs');
    const result: PathRestoreResult = { undoCheckpointId: undo.id, path: target, files: 0, directories: 0, symlinks: 0, skipped: [] };
    await this.deps.calls.withSandbox(caller, session.id, { repeatable: false }, async ({ node, sandboxId }) => {
      const modes = new Map<string, string[]>();
      const copy = new TreeCopy(source, checkpoint.id, node, sandboxId, result, modes);
      await copy.entry(top, target);
      for (const [mode, paths] of modes) for (const chunk of chunksOf(paths, chmodBatch)) await run(node, sandboxId, ['chmod', mode, '--', ...chunk]);
    });
    return result;
  }
}

/** A restore's target may not be a volume's mount point nor hold one, nor be the root or under /proc, /sys or /dev. */
function refuseTarget(target: string, session: SessionRow): void {
  if (target === '/' || systemRoots.some((root) => target === root || target.startsWith(`${root}/`)))
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, `a path is not restored onto ${target}: the root, /proc, /sys and /dev are refused`);
  const mount = session.volumes.find((v) => v.path === target || v.path.startsWith(`${target}/`));
  if (mount)
    throw new SpaceError(
      ErrorCode.VALIDATION_FAILED,
      `${target} ${mount.path === target ? 'is' : 'holds'} the mount point of volume ${mount.name} (${mount.path}): restore a path inside it instead`,
    );
}

/** Runs a command in the sandbox; a failure is the restore's. */
async function run(node: NodeClient, sandboxId: string, cmd: string[]): Promise<void> {
  const done = await node.sandboxExec(sandboxId, cmd);
  if (done.exitCode !== 0) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `${cmd[0]} in the sandbox failed: ${done.stderr.trim().slice(0, 500)}`);
}

/** Copies one checkpoint entry (a directory with all it holds) into the sandbox, counting into `result`, collecting modes to set. */
class TreeCopy {
  private entries = 0;

  constructor(
    private readonly source: NodeClient,
    private readonly checkpointId: string,
    private readonly node: NodeClient,
    private readonly sandboxId: string,
    private readonly result: PathRestoreResult,
    private readonly modes: Map<string, string[]>,
  ) {}

  async entry(entry: FileStat, target: string): Promise<void> {
    if (++this.entries > maxRestoreEntries)
      throw new SpaceError(
        ErrorCode.PAYLOAD_TOO_LARGE,
        `more than ${maxRestoreEntries} entries to restore: restore a smaller path (what was written stays; restore checkpoint ${this.result.undoCheckpointId} to undo it)`,
      );
    switch (entry.type) {
      case 'file': {
        const { stream, length } = await this.source.checkpointFileStream(this.checkpointId, entry.path);
        // An upload that fails leaves the download unread: ended, so its connection is not held.
        await this.node.sandboxUpload(this.sandboxId, target, stream, length).finally(() => stream.destroy());
        this.result.files++;
        this.mode(entry, target);
        return;
      }
      case 'directory': {
        await run(this.node, this.sandboxId, ['mkdir', '-p', '--', target]);
        this.result.directories++;
        const listed = await this.source.checkpointFileList(this.checkpointId, entry.path);
        if (listed.truncated)
          throw new SpaceError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            `${entry.path} holds more entries than a restore takes (${maxRestoreEntries}): restore a smaller path`,
          );
        for (const child of listed.entries) await this.entry(child, path.posix.join(target, child.name));
        this.mode(entry, target);
        return;
      }
      case 'symlink':
        await run(this.node, this.sandboxId, ['ln', '-sfn', '--', entry.target ?? '', target]);
        this.result.symlinks++;
        return;
      default:
        if (this.result.skipped.length < 1000) this.result.skipped.push(entry.path);
    }
  }

  /** The checkpoint's mode, set at the end in batches (a file written over an existing one keeps that one's mode until then). */
  private mode(entry: FileStat, target: string): void {
    const octal = entry.mode.toString(8);
    const paths = this.modes.get(octal);
    if (paths) paths.push(target);
    else this.modes.set(octal, [target]);
  }
}
