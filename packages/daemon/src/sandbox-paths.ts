import path from 'node:path';
import { ErrorCode, SpaceError } from '@space/protocol';

/** Resolves request paths inside the sandbox: relative ones against the working directory. */
export class SandboxPaths {
  constructor(readonly workdir: string) {}

  resolve(requested: string): string {
    if (requested.split('/').includes('..')) throw new SpaceError(ErrorCode.INVALID_PATH, `path ${JSON.stringify(requested)} may not contain ".." segments`);
    return path.resolve(this.workdir, requested);
  }
}
