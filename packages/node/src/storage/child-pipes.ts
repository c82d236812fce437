import type { ChildProcess } from 'node:child_process';
import { PassThrough, type Readable, Writable } from 'node:stream';

// The ends of the btrfs and tar children that shipping streams objects through, and how a read of one ends.

/** Waits for a child process to end; its stderr in the error when it fails. */
export function finished(child: ChildProcess, what: string): Promise<void> {
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (stderr.length < 4000) stderr += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.once('error', (err) => reject(new Error(`${what}: ${err.message}`)));
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${what} failed (exit ${code}): ${stderr.trim()}`))));
  });
}

/**
 * The child's stdin as the end of a pipeline that reads its source to the end whatever the child
 * does: `tar -x` and `btrfs receive -e` exit (successfully) at their end marker and may close their
 * stdin before the last bytes (a tar's padding) are written, which failed the whole receive with a
 * premature close. What they leave unread still passes the digest, so the object is checked whole;
 * whether the child succeeded is its exit code's to say.
 *
 * It finishes only once stdin has handed its last bytes to the pipe (or the child closed it), and
 * destroys stdin only on an error: a finished pipeline destroys its streams, and
 * destroying stdin while the child was still reading dropped what was queued in it (a memory image
 * received without its last kilobytes: "tar: Unexpected EOF in archive", 1 receive in 40 under load).
 */
export function toStdin(child: ChildProcess): Writable {
  const stdin = child.stdin!;
  let gone = false;
  stdin.on('error', () => (gone = true));
  stdin.once('close', () => (gone = true));
  /** Calls `callback` once stdin emits `event` (drained, or finished after its end) or closed, whichever comes first. */
  const whenOrClosed = (event: 'drain' | 'finish', callback: () => void): void => {
    const settle = (): void => {
      stdin.off(event, settle);
      stdin.off('close', settle);
      callback();
    };
    stdin.once(event, settle);
    stdin.once('close', settle);
  };
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (gone || stdin.write(chunk)) return callback();
      whenOrClosed('drain', callback);
    },
    final(callback) {
      if (gone) return callback();
      whenOrClosed('finish', callback);
      stdin.end();
    },
    destroy(err, callback) {
      if (err) stdin.destroy();
      callback(err);
    },
  });
}

/**
 * A child's output, taken at once: Node discards what a child wrote to a stdout nobody reads by the
 * time it exits, and a short send can exit before its consumer is ready. `done` is handled from the
 * start: a child that fails (a Ctrl-C reached it) while its output is still being stored must not
 * be an unhandled rejection, which ends the node with its sandboxes and mounts left behind.
 */
export function produce(child: ChildProcess, what: string): { output: Readable; done: Promise<void> } {
  const output = new PassThrough();
  child.stdout!.pipe(output);
  const done = finished(child, what);
  done.catch(() => undefined);
  return { output, done };
}

/** How `read` ends within `ms`: read to its end, broken off (its error), or still going. */
export async function readOn(read: Promise<void>, ms: number): Promise<'ended' | 'late' | Error> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    return await Promise.race([
      read.then(
        () => 'ended' as const,
        (err: Error) => err,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
