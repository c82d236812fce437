import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import type { DiffEntryData, FileEntry, PathVersionData } from '@space/sdk';
import { cliClient, output } from '../client.js';

/** `CHECKPOINT:path`, as `cat` and `ls` name a file of a checkpoint. */
export function checkpointPath(target: string): { checkpointId: string; path: string } | null {
  const match = /^(ckp_[a-z0-9]+):(.+)$/.exec(target);
  return match ? { checkpointId: match[1]!, path: match[2]! } : null;
}

const entryLine = (e: FileEntry): string =>
  `${e.type.padEnd(9)} ${String(e.size).padStart(10)}  ${e.mtime}  ${e.name}${e.target === undefined ? '' : ` -> ${e.target}`}`;

const diffLine = (e: DiffEntryData): string =>
  `${e.change.padEnd(8)} ${e.type.padEnd(9)} ${e.path}${e.from === undefined ? '' : ` (from ${e.from})`}${e.change === 'modified' ? `  ${e.sizeBefore} -> ${e.sizeAfter} bytes` : ''}`;

const versionLine = (v: PathVersionData): string =>
  `${v.checkpointId}  ${v.createdAt}  ${v.change.padEnd(9)} ${v.size === null ? '-'.padStart(10) : String(v.size).padStart(10)}  ${v.sha256?.slice(0, 12) ?? ''}`;

/** A checkpoint's files without a sandbox: `ls CHECKPOINT:dir` (in sessions.ts, beside `ls`), cat, diff, history. */
export function registerCheckpointFileCommands(program: Command): void {
  program
    .command('cat <checkpointPath>')
    .description('print a file as it was in a checkpoint, "CHECKPOINT:path" (no sandbox starts; a relative path is from the working directory)')
    .action(async (target: string) => {
      const at = checkpointPath(target);
      if (!at) throw new Error(`expected CHECKPOINT:path (ckp_…:/workspace/file), got ${JSON.stringify(target)}`);
      await pipeline(await cliClient(process.env).checkpoints.files(at.checkpointId).download(at.path), process.stdout);
    });

  program
    .command('diff <from> <to>')
    .description(
      "what differs from one checkpoint to another of its lineage, or to `live` (the session's files now, checkpointed first): added, removed, modified, renamed, mode, by path",
    )
    .option('--path <path>', 'one file only: its unified diff (text of at most 1 MiB), else its sizes and sha256')
    .option('--json', 'print JSON')
    .action(async (from: string, to: string, opts: { path?: string; json?: boolean }) => {
      const space = cliClient(process.env);
      if (opts.path !== undefined) {
        const file = await space.checkpoints.diffFile(from, to, opts.path);
        const summary = `${file.path}: ${file.sizeBefore ?? '-'} -> ${file.sizeAfter ?? '-'} bytes, sha256 ${file.sha256Before ?? '-'} -> ${file.sha256After ?? '-'}`;
        return output(Boolean(opts.json), file, () => (file.unified === '' ? 'no differences' : (file.unified ?? summary)));
      }
      const entries: DiffEntryData[] = [];
      // Every page: a diff is listed whole here, each page against the checkpoint the first named (`live` takes one).
      let after: string | null | undefined;
      let target = to;
      do {
        const page = await space.checkpoints.diff(from, target, after ? { after } : {});
        entries.push(...page.entries);
        target = page.to;
        after = page.next;
      } while (after);
      output(Boolean(opts.json), { from, to: target, entries }, () => (entries.length ? entries.map(diffLine).join('\n') : 'no differences'));
    });

  program
    .command('history <session> <path>')
    .description("a path in each of the session's checkpoints, oldest first: how it changed, its size and sha256")
    .option('--json', 'print JSON')
    .action(async (id: string, path: string, opts: { json?: boolean }) => {
      const history = await cliClient(process.env).sessions.handle(id).files.history(path);
      output(Boolean(opts.json), history, () =>
        history.versions.length ? [history.path, ...history.versions.map(versionLine)].join('\n') : `${history.path}: the session has no checkpoints`,
      );
    });
}

/** `ls CHECKPOINT:dir`: a directory as it was in a checkpoint. */
export async function listCheckpointDirectory(at: { checkpointId: string; path: string }, json: boolean): Promise<void> {
  const entries = await cliClient(process.env).checkpoints.files(at.checkpointId).list(at.path);
  output(json, entries, () => (entries.length ? entries.map(entryLine).join('\n') : 'empty directory'));
}
