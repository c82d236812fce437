/**
 * What a host-side failure says to an API caller: the node's own file operations fail with errors
 * that name host paths and, for errnos libuv has no name for, a raw number ("Unknown system error
 * -122"). Neither is the caller's business: a system error becomes what it means, with the call
 * that failed; any other error keeps its message.
 */
const meanings: Record<string, string> = {
  EDQUOT: "the session's disk is full (its diskGb limit)",
  ENOSPC: "the node's disk is full",
  EACCES: 'permission denied on the node',
  EPERM: 'operation not permitted on the node',
  ENOENT: 'a file the node needs is missing',
  EEXIST: 'a file the node writes is in the way',
  ELOOP: 'a link in the session stands where the node writes',
  ENOTDIR: 'a file in the session stands where the node needs a directory',
  EISDIR: 'a directory in the session stands where the node writes a file',
  EMFILE: 'the node has too many open files',
  ENFILE: 'the node has too many open files',
  ENOMEM: 'the node is out of memory',
  EIO: 'an I/O error on the node',
  EROFS: "the node's volume is read-only",
  EBUSY: 'a resource on the node is busy',
};

/** Errnos libuv does not name on Linux (it reports them as "Unknown system error -N"). */
const unnamed: Record<number, string> = { [-122]: 'EDQUOT' };

/** The errno's name of a system error (`EDQUOT`, `ENOSPC`, …), or null for other errors. */
export function errnoOf(err: unknown): string | null {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.errno !== 'number' || typeof e.syscall !== 'string') return null;
  return unnamed[e.errno] ?? (typeof e.code === 'string' && /^E[A-Z0-9]+$/.test(e.code) ? e.code : `errno ${-e.errno}`);
}

export function hostErrorText(err: unknown): string {
  const errno = errnoOf(err);
  if (errno === null) return (err as Error)?.message ?? String(err);
  return `${meanings[errno] ?? `a system error on the node (${errno})`} (${(err as NodeJS.ErrnoException).syscall})`;
}
