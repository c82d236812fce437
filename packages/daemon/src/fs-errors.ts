import { ErrorCode, SpaceError, isSpaceError } from '@space/protocol';

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
};

/** Maps a Node fs error to the API's error for the path the caller named. */
export function fsError(err: unknown, path: string): SpaceError {
  if (isSpaceError(err)) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? '';
  const mapped = byErrno[code];
  if (mapped) return new SpaceError(mapped, `${JSON.stringify(path)}: ${code}`);
  return new SpaceError(ErrorCode.INTERNAL, `${JSON.stringify(path)}: ${(err as Error)?.message ?? String(err)}`);
}

export async function mapFsErrors<T>(path: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw fsError(err, path);
  }
}
