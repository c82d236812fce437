import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';

/**
 * Every errno a file or process operation in the sandbox can meet, as the client's error: what the
 * caller asked for cannot be done, which is never a bug of ours (a 500 is kept for those).
 */
const byErrno: Record<string, ErrorCode> = {
  ENOENT: ErrorCode.FILE_NOT_FOUND,
  EISDIR: ErrorCode.IS_A_DIRECTORY,
  ENOTDIR: ErrorCode.NOT_A_DIRECTORY,
  EEXIST: ErrorCode.FILE_EXISTS,
  ENOTEMPTY: ErrorCode.DIRECTORY_NOT_EMPTY,
  EACCES: ErrorCode.FORBIDDEN,
  EPERM: ErrorCode.FORBIDDEN,
  EROFS: ErrorCode.FORBIDDEN,
  ENAMETOOLONG: ErrorCode.INVALID_PATH,
  ELOOP: ErrorCode.INVALID_PATH,
  EINVAL: ErrorCode.INVALID_PATH,
  EBUSY: ErrorCode.RESOURCE_BUSY,
  ETXTBSY: ErrorCode.RESOURCE_BUSY,
  EXDEV: ErrorCode.INVALID_PATH,
  ENOSPC: ErrorCode.NO_SPACE,
  EDQUOT: ErrorCode.NO_SPACE,
  EFBIG: ErrorCode.PAYLOAD_TOO_LARGE,
  EMFILE: ErrorCode.RESOURCE_EXHAUSTED,
  ENFILE: ErrorCode.RESOURCE_EXHAUSTED,
  ENOMEM: ErrorCode.RESOURCE_EXHAUSTED,
  EAGAIN: ErrorCode.RESOURCE_EXHAUSTED,
  EMLINK: ErrorCode.RESOURCE_EXHAUSTED,
  E2BIG: ErrorCode.EXEC_FAILED,
  ENOEXEC: ErrorCode.EXEC_FAILED,
  ENOTSUP: ErrorCode.VALIDATION_FAILED,
  EOPNOTSUPP: ErrorCode.VALIDATION_FAILED,
  ENXIO: ErrorCode.VALIDATION_FAILED,
  ENODEV: ErrorCode.VALIDATION_FAILED,
  ESPIPE: ErrorCode.VALIDATION_FAILED,
  EIO: ErrorCode.SANDBOX_UNAVAILABLE,
};

const meaning: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  EEXIST: 'already exists',
  ENOTEMPTY: 'directory not empty',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENAMETOOLONG: 'name too long',
  ELOOP: 'too many levels of symbolic links',
  EINVAL: 'invalid argument',
  EBUSY: 'busy (a mount point or in use)',
  ETXTBSY: 'text file busy',
  EXDEV: 'crosses file systems',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'file too large',
  EMFILE: 'too many open files in the sandbox',
  ENFILE: 'too many open files in the sandbox',
  ENOMEM: 'out of memory',
  EAGAIN: 'resource temporarily unavailable',
  EMLINK: 'too many links',
  E2BIG: 'argument list too long',
  ENOEXEC: 'not an executable format',
  EIO: 'I/O error in the sandbox',
};

/** The stable code for an errno, if it has one. */
export function codeOfErrno(errno: string): ErrorCode | undefined {
  return byErrno[errno];
}

/** Maps a Node fs error to the API's error for the path the caller named. */
export function fsError(err: unknown, path: string): SpaceError {
  if (isSpaceError(err)) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? '';
  const mapped = byErrno[code];
  if (mapped) return new SpaceError(mapped, `${JSON.stringify(path)}: ${meaning[code] ?? code} (${code})`);
  return new SpaceError(ErrorCode.INTERNAL, `${JSON.stringify(path)}: ${(err as Error)?.message ?? String(err)}`);
}

export async function mapFsErrors<T>(path: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw fsError(err, path);
  }
}
