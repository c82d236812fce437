import { chmod, lstat, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, SpaceError, type TemplateConfig } from '@space/protocol';
import { z } from 'zod';
import { runCommand } from '../run-command.js';
import { pullError } from './registry-host.js';

/** Where an image comes from: an archive on this node (`docker save` or an OCI layout tar), or a registry (`docker://…`, where reachable). */
export type ImageSource = { archive: string } | { registry: string };

const refName = 'space-import';

const IndexSchema = z
  .object({ manifests: z.array(z.object({ digest: z.string(), annotations: z.record(z.string()).optional() }).passthrough()).min(1) })
  .passthrough();
const ManifestSchema = z.object({ config: z.object({ digest: z.string() }).passthrough() }).passthrough();
const ImageConfigSchema = z
  .object({
    config: z
      .object({
        Env: z.array(z.string()).nullish(),
        Cmd: z.array(z.string()).nullish(),
        Entrypoint: z.array(z.string()).nullish(),
        WorkingDir: z.string().nullish(),
        User: z.string().nullish(),
        Labels: z.record(z.string()).nullish(),
        ExposedPorts: z.record(z.unknown()).nullish(),
      })
      .passthrough()
      .nullish(),
  })
  .passthrough();

/** `docker-archive:` for a `docker save` tar (it has manifest.json), `oci-archive:` for an OCI layout tar (it has oci-layout). */
async function transportOf(archive: string): Promise<string> {
  const { stdout, code } = await runCommand(['tar', '-tf', archive], { allowFailure: true });
  if (code !== 0) throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'the image is not a tar archive (give a `docker save` archive or an OCI layout tar)');
  const names = new Set(stdout.split('\n').map((n) => n.replace(/^\.\//, '')));
  if (names.has('manifest.json')) return 'docker-archive';
  if (names.has('oci-layout')) return 'oci-archive';
  throw new SpaceError(ErrorCode.VALIDATION_FAILED, 'the archive is neither a `docker save` archive (manifest.json) nor an OCI layout (oci-layout)');
}

/** The largest index, manifest or config an image may have: they are the tenant's, parsed whole. */
const maxMetadataBytes = 4 * 1024 * 1024;

/** A JSON file of the layout, refused past `maxMetadataBytes` (and never followed if it is a link). */
async function metadata(file: string): Promise<unknown> {
  const stat = await lstat(file);
  if (!stat.isFile() || stat.size > maxMetadataBytes)
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, `the image's ${path.basename(file)} is not a file of at most ${maxMetadataBytes / 1024 / 1024} MB`);
  try {
    return JSON.parse(await readFile(file, 'utf8'));
  } catch {
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, `the image's ${path.basename(file)} is not JSON`);
  }
}

/** The image's config (from the OCI layout skopeo wrote) as a template's: env, workdir, user, ENTRYPOINT + CMD, labels, exposed ports. */
async function configOf(layout: string): Promise<TemplateConfig> {
  const blob = (digest: string) => {
    if (!/^sha(256:[a-f0-9]{64}|512:[a-f0-9]{128})$/.test(digest))
      throw new SpaceError(ErrorCode.VALIDATION_FAILED, `the image names a blob ${JSON.stringify(digest.slice(0, 80))}`);
    return metadata(path.join(layout, 'blobs', ...digest.split(':')));
  };
  const index = IndexSchema.parse(await metadata(path.join(layout, 'index.json')));
  const manifest = ManifestSchema.parse(await blob(index.manifests[0]!.digest));
  const config = ImageConfigSchema.parse(await blob(manifest.config.digest)).config ?? {};
  const env = Object.fromEntries(
    (config.Env ?? []).flatMap((pair) => {
      const at = pair.indexOf('=');
      return at > 0 ? [[pair.slice(0, at), pair.slice(at + 1)]] : [];
    }),
  );
  const argv = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
  return {
    env,
    workdir: config.WorkingDir || '/',
    user: config.User || 'root',
    cmd: argv.length > 0 ? argv : null,
    labels: config.Labels ?? {},
    expose: Object.keys(config.ExposedPorts ?? {})
      .map((port) => Number(port.split('/')[0]))
      .filter((port) => Number.isInteger(port) && port > 0 && port < 65536),
  };
}

/**
 * Unpacks an image into `target` (an empty directory: the template's subvolume) with Debian's
 * tools: skopeo brings it into an OCI layout, umoci unpacks its layers (refusing paths that leave
 * the root, as it does). Then device nodes are removed (a sandbox has no use for the host's
 * devices) while setuid bits stay (inside the template only), and the directories every sandbox
 * needs are made. `work` is scratch space, removed by the caller. Returns the image's config.
 */
export async function unpackImage(
  source: ImageSource,
  target: string,
  work: string,
  progress: (line: string) => void,
  abort?: AbortSignal,
): Promise<TemplateConfig> {
  const layout = path.join(work, 'layout');
  const from = 'archive' in source ? `${await transportOf(source.archive)}:${source.archive}` : source.registry;
  progress(`copying ${'archive' in source ? 'the archive' : source.registry} into an OCI layout`);
  const copied = await runCommand(['skopeo', 'copy', '--quiet', from, `oci:${layout}:${refName}`], { allowFailure: true, abort });
  if (copied.code !== 0) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `skopeo could not read the image: ${pullError(copied.stderr || copied.stdout)}`);
  const config = await configOf(layout);
  const bundle = path.join(target, '.space-unpack');
  progress('unpacking its layers');
  const unpacked = await runCommand(['umoci', 'unpack', '--image', `${layout}:${refName}`, bundle], { allowFailure: true, abort });
  if (unpacked.code !== 0)
    throw new SpaceError(ErrorCode.VALIDATION_FAILED, `umoci could not unpack the image: ${(unpacked.stderr || unpacked.stdout).trim().slice(-500)}`);
  // The root's entries move up into the subvolume: renames within it, nothing copied.
  const rootfs = path.join(bundle, 'rootfs');
  for (const entry of await readdir(rootfs)) await rename(path.join(rootfs, entry), path.join(target, entry));
  await rm(bundle, { recursive: true, force: true });
  await runCommand(['find', target, '-xdev', '(', '-type', 'b', '-o', '-type', 'c', ')', '-delete']);
  for (const [dir, mode] of [
    ['tmp', 0o1777],
    ['workspace', 0o755],
  ] as const) {
    const at = path.join(target, dir);
    const stat = await lstat(at).catch(() => null);
    if (stat && !stat.isDirectory()) await rm(at, { force: true });
    if (!stat?.isDirectory()) {
      await mkdir(at);
      await chmod(at, mode);
    }
  }
  return config;
}
