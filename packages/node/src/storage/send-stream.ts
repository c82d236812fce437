import type { Readable } from 'node:stream';

/**
 * The commands of a `btrfs send` stream (version 1, `--proto 1`) that say what changed, in the
 * kernel's own format (fs/btrfs/send.h): a magic and version, then commands of a 10-byte header
 * (length, command, crc32c) and their attributes (type, length, value). Only names and modes are
 * read: a diff sent with `--no-data` carries no file contents.
 */
export type SendCommand =
  | { kind: 'create'; path: string; type: 'file' | 'directory' | 'symlink' | 'other' }
  | { kind: 'rename'; path: string; to: string }
  | { kind: 'link'; path: string; target: string }
  | { kind: 'unlink' | 'rmdir' | 'write' | 'chmod' | 'chown' | 'xattr'; path: string };

const magic = Buffer.from('btrfs-stream\0');
const headerBytes = 10;
/** A v1 command is at most 64 KiB (BTRFS_SEND_BUF_SIZE_V1); anything larger is not a stream this reads. */
const maxCommandBytes = 64 * 1024;

// enum btrfs_send_cmd and the attributes' enum, in the kernel's order.
const commands = {
  mkfile: 3,
  mkdir: 4,
  mknod: 5,
  mkfifo: 6,
  mksock: 7,
  symlink: 8,
  rename: 9,
  link: 10,
  unlink: 11,
  rmdir: 12,
  setXattr: 13,
  removeXattr: 14,
  write: 15,
  clone: 16,
  truncate: 17,
  chmod: 18,
  chown: 19,
  updateExtent: 22,
} as const;
const attributes = { path: 15, pathTo: 16, pathLink: 17 } as const;

/** Reads the stream's commands one by one; a stream that is not a v1 send stream, or breaks off mid-command, throws. */
export async function* sendCommands(stream: Readable): AsyncGenerator<SendCommand> {
  let buffered: Buffer = Buffer.alloc(0);
  let started = false;
  for await (const chunk of stream) {
    buffered = buffered.length ? Buffer.concat([buffered, chunk as Buffer]) : (chunk as Buffer);
    if (!started) {
      if (buffered.length < magic.length + 4) continue;
      if (!buffered.subarray(0, magic.length).equals(magic)) throw new Error('not a btrfs send stream');
      const version = buffered.readUInt32LE(magic.length);
      if (version !== 1) throw new Error(`btrfs send stream version ${version}, expected 1 (--proto 1)`);
      buffered = buffered.subarray(magic.length + 4);
      started = true;
    }
    while (buffered.length >= headerBytes) {
      const length = buffered.readUInt32LE(0);
      if (length > maxCommandBytes) throw new Error(`a btrfs send command of ${length} bytes`);
      if (buffered.length < headerBytes + length) break;
      const command = decode(buffered.readUInt16LE(4), buffered.subarray(headerBytes, headerBytes + length));
      buffered = buffered.subarray(headerBytes + length);
      if (command) yield command;
    }
  }
  if (!started || buffered.length > 0) throw new Error('the btrfs send stream broke off');
}

function decode(cmd: number, body: Buffer): SendCommand | null {
  const values = new Map<number, string>();
  for (let at = 0; at + 4 <= body.length; ) {
    const type = body.readUInt16LE(at);
    const length = body.readUInt16LE(at + 2);
    if (type === attributes.path || type === attributes.pathTo || type === attributes.pathLink)
      values.set(type, body.subarray(at + 4, at + 4 + length).toString('utf8'));
    at += 4 + length;
  }
  const path = values.get(attributes.path);
  if (path === undefined) return null;
  switch (cmd) {
    case commands.mkfile:
      return { kind: 'create', path, type: 'file' };
    case commands.mkdir:
      return { kind: 'create', path, type: 'directory' };
    case commands.symlink:
      return { kind: 'create', path, type: 'symlink' };
    case commands.mknod:
    case commands.mkfifo:
    case commands.mksock:
      return { kind: 'create', path, type: 'other' };
    case commands.rename:
      return { kind: 'rename', path, to: values.get(attributes.pathTo) ?? path };
    case commands.link:
      return { kind: 'link', path, target: values.get(attributes.pathLink) ?? path };
    case commands.unlink:
      return { kind: 'unlink', path };
    case commands.rmdir:
      return { kind: 'rmdir', path };
    case commands.write:
    case commands.clone:
    case commands.truncate:
    case commands.updateExtent:
      return { kind: 'write', path };
    case commands.chmod:
      return { kind: 'chmod', path };
    case commands.chown:
      return { kind: 'chown', path };
    case commands.setXattr:
    case commands.removeXattr:
      return { kind: 'xattr', path };
    default:
      // SUBVOL, SNAPSHOT, UTIMES, END: no change of a file's own (times alone are not a change).
      return null;
  }
}
