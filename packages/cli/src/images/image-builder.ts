import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, chmod, chown, cp, mkdir, mkdtemp, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { debootstrap, runCommand } from '@space/node';
import { type ImageRecipe, imageDataDir } from './image-recipes.js';

export interface ImageBuildOptions {
  /** The repository: its built packages (`npm run build`) go into the images. */
  repoRoot: string;
  /** Node.js's directory (bin/node): the one SPACE runs on goes into both images. */
  nodeHome: string;
  /** Each image's OCI layout goes to `<outDir>/space-<name>`, its `docker save` archive to `<outDir>/space-<name>-<tag>.tar`. */
  outDir: string;
  /** Downloaded packages, the base root filesystems and the npm dependencies, kept between builds. */
  cacheDir: string;
  tag: string;
  /** The git commit the images are built from (a label of each). */
  revision: string;
  /** The image's creation time (the commit's, so a rebuild of a commit says the same). */
  created: string;
  /** Where debootstrap fetches bookworm from. */
  mirror: string;
  progress: (line: string) => void;
}

export interface BuiltImage {
  /** `space-<name>:<tag>`, as `docker load` names it. */
  reference: string;
  /** The OCI layout (`oci:<layout>:<tag>` for skopeo, umoci, crun bundles). */
  layout: string;
  /** The `docker save`-compatible archive (`docker load`, `ctr images import`, `skopeo copy docker-archive:`). */
  archive: string;
  /** Compressed layers, base system first. */
  layers: { digest: string; bytes: number }[];
  archiveBytes: number;
}

/** Where SPACE lives in both images. */
const imageAppDir = '/opt/space';
const imagePath = `${imageAppDir}/node/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

/**
 * Builds one of SPACE's images without pulling any base image: a Debian bookworm root filesystem
 * from debootstrap (cached by its package list), then SPACE itself (Node.js, the built packages,
 * their production dependencies) as a second layer, assembled with umoci into an OCI layout and
 * copied by skopeo into a `docker save` archive.
 */
export async function buildImage(recipe: ImageRecipe, options: ImageBuildOptions): Promise<BuiltImage> {
  const name = `space-${recipe.name}`;
  const say = (line: string) => options.progress(`${name}: ${line}`);
  const base = await baseRootfs(recipe, options, say);
  const modules = await productionModules(options, say);
  const layout = path.join(options.outDir, name);
  const work = await mkdtemp(path.join(options.cacheDir, `${name}-bundle-`));
  const image = `${layout}:${options.tag}`;
  try {
    if (!existsSync(path.join(layout, 'index.json'))) await runCommand(['umoci', 'init', '--layout', layout]);
    await runCommand(['umoci', 'new', '--image', image]);
    const bundle = path.join(work, 'bundle');
    await runCommand(['umoci', 'unpack', '--image', image, bundle]);
    const rootfs = path.join(bundle, 'rootfs');
    say('layer 1: the Debian system');
    await runCommand(['cp', '-a', `${base}/.`, rootfs]);
    await runCommand(['umoci', 'repack', '--refresh-bundle', '--image', image, bundle]);
    say('layer 2: SPACE (Node.js, the built packages, their dependencies)');
    await installApp(rootfs, recipe, modules, options);
    await runCommand(['umoci', 'repack', '--image', image, bundle]);
    await runCommand([
      'umoci',
      'config',
      '--image',
      image,
      '--author=SPACE',
      `--created=${options.created}`,
      '--config.entrypoint=space',
      `--config.cmd=${recipe.name}`,
      `--config.env=PATH=${imagePath}`,
      `--config.env=SPACE_DATA_DIR=${imageDataDir}`,
      '--config.workingdir=/',
      ...(recipe.uid ? [`--config.user=${recipe.uid}:${recipe.uid}`] : []),
      `--config.label=org.opencontainers.image.title=${name}`,
      `--config.label=org.opencontainers.image.version=${options.tag}`,
      `--config.label=org.opencontainers.image.revision=${options.revision}`,
      `--config.label=org.opencontainers.image.created=${options.created}`,
    ]);
    await runCommand(['umoci', 'gc', '--layout', layout]);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  const archive = path.join(options.outDir, `${name}-${options.tag}.tar`);
  say(`docker save archive ${archive}`);
  await rm(archive, { force: true });
  await runCommand(['skopeo', 'copy', '--quiet', `oci:${image}`, `docker-archive:${archive}:${name}:${options.tag}`]);
  return { reference: `${name}:${options.tag}`, layout, archive, layers: await layersOf(layout, options.tag), archiveBytes: (await stat(archive)).size };
}

/**
 * The Debian root filesystem of `recipe`, made once per package list and backports version and
 * kept in the cache: debootstrap minbase with its packages, the backports' .deb files (the host's
 * versions, fetched with apt) installed into it, and apt's caches and the docs left out.
 */
async function baseRootfs(recipe: ImageRecipe, options: ImageBuildOptions, say: (line: string) => void): Promise<string> {
  const versions = await Promise.all(recipe.backports.map(async (p) => `${p}=${await installedVersion(p)}`));
  const fingerprint = createHash('sha256')
    .update(JSON.stringify({ v: 1, packages: recipe.packages, versions, mirror: options.mirror }))
    .digest('hex')
    .slice(0, 16);
  const dir = path.join(options.cacheDir, `rootfs-${recipe.name}-${fingerprint}`);
  if (existsSync(dir)) {
    say(`the Debian system is cached (${path.basename(dir)})`);
    return dir;
  }
  const building = `${dir}.building`;
  await rm(building, { recursive: true, force: true });
  say(`debootstrap bookworm from ${options.mirror} with ${recipe.packages.length} packages (a minute or two the first time)`);
  const debs = path.join(options.cacheDir, 'debs');
  await mkdir(debs, { recursive: true });
  await debootstrap(building, options.mirror, debs, recipe.packages, say);
  if (versions.length) {
    say(`installing ${versions.join(', ')} from bookworm-backports`);
    const downloads = path.join(building, 'tmp/backports');
    await mkdir(downloads, { recursive: true });
    await runCommand(['apt-get', 'download', '-q', ...versions], { cwd: downloads });
    const files = (await readdir(downloads)).map((f) => `/tmp/backports/${f}`);
    await runCommand(['chroot', building, '/usr/bin/env', '-i', 'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'dpkg', '-i', ...files]);
    await rm(downloads, { recursive: true, force: true });
  }
  for (const leftOver of ['var/cache/apt', 'var/lib/apt/lists', 'usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale', 'var/log'])
    await rm(path.join(building, leftOver), { recursive: true, force: true });
  await mkdir(path.join(building, 'var/log'));
  await rename(building, dir);
  await pruneCache(options.cacheDir, `rootfs-${recipe.name}-`, dir);
  return dir;
}

/** Removes the cache's older entries beside `kept` (another package list or lock, a build cut short). */
async function pruneCache(cacheDir: string, prefix: string, kept: string): Promise<void> {
  for (const entry of await readdir(cacheDir))
    if (entry.startsWith(prefix) && path.join(cacheDir, entry) !== kept) await rm(path.join(cacheDir, entry), { recursive: true, force: true });
}

async function installedVersion(pkg: string): Promise<string> {
  const { stdout } = await runCommand(['dpkg-query', '-W', `-f=\${Version}`, pkg], { allowFailure: true });
  if (!stdout) throw new Error(`${pkg} is not installed on this host: "./space setup" installs it from bookworm-backports`);
  return stdout;
}

/**
 * The production dependencies of the CLI (which runs both processes), installed once per
 * package-lock.json with npm's own lock: no build tools in the image, so native modules' builds
 * are copied from the repository's node_modules, built for the same Node.js by `./space`.
 */
async function productionModules(options: ImageBuildOptions, say: (line: string) => void): Promise<string> {
  const lock = await readFile(path.join(options.repoRoot, 'package-lock.json'));
  const dir = path.join(options.cacheDir, `modules-${createHash('sha256').update(lock).digest('hex').slice(0, 16)}`);
  if (existsSync(dir)) return path.join(dir, 'node_modules');
  const building = `${dir}.building`;
  await rm(building, { recursive: true, force: true });
  await mkdir(building, { recursive: true });
  say('installing the production npm dependencies (once per package-lock.json)');
  const rootPackage = JSON.parse(await readFile(path.join(options.repoRoot, 'package.json'), 'utf8')) as { workspaces: string[] };
  for (const file of ['package.json', 'package-lock.json', ...rootPackage.workspaces.map((w) => `${w}/package.json`)]) {
    await mkdir(path.dirname(path.join(building, file)), { recursive: true });
    await cp(path.join(options.repoRoot, file), path.join(building, file));
  }
  await runCommand(['npm', 'ci', '--omit=dev', '--ignore-scripts', '--workspace=packages/cli', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: building,
    env: { ...process.env, PATH: `${path.join(options.nodeHome, 'bin')}:${process.env.PATH}` },
  });
  const modules = path.join(building, 'node_modules');
  for (const pkg of await readdir(modules)) {
    const built = path.join(options.repoRoot, 'node_modules', pkg, 'build/Release');
    if (existsSync(path.join(modules, pkg, 'binding.gyp')) && existsSync(built)) await cp(built, path.join(modules, pkg, 'build/Release'), { recursive: true });
  }
  await rename(building, dir);
  await pruneCache(options.cacheDir, 'modules-', dir);
  return path.join(dir, 'node_modules');
}

/** SPACE in `/opt/space`: Node.js with npm, each package's built files, the dependencies; `space` on the PATH; the image's user. */
async function installApp(rootfs: string, recipe: ImageRecipe, modules: string, options: ImageBuildOptions): Promise<void> {
  const app = path.join(rootfs, imageAppDir.slice(1));
  await mkdir(path.join(app, 'node/bin'), { recursive: true });
  await cp(path.join(options.nodeHome, 'bin/node'), path.join(app, 'node/bin/node'));
  if (recipe.npm) {
    // The host's version, from the registry.
    const npm = path.join(app, 'node/lib/node_modules/npm');
    await mkdir(npm, { recursive: true });
    await runCommand(['tar', '-xzf', await npmTarball(options.cacheDir), '-C', npm, '--strip-components=1', '--no-same-owner']);
    await runCommand(['ln', '-s', '../lib/node_modules/npm/bin/npm-cli.js', path.join(app, 'node/bin/npm')]);
  }
  const packages = path.join(options.repoRoot, 'packages');
  for (const pkg of await readdir(packages)) {
    if (!existsSync(path.join(packages, pkg, 'package.json')) || pkg === 'e2e') continue;
    for (const part of ['package.json', 'dist', 'dist-native', 'dist-app']) {
      const from = path.join(packages, pkg, part);
      if (existsSync(from)) await cp(from, path.join(app, 'packages', pkg, part), { recursive: true, filter: (f) => !/\.(test\.js|map|d\.ts)$/.test(f) });
    }
  }
  if (recipe.sandboxRuntime) await cp(path.join(packages, 'agent/dist'), path.join(app, 'packages/agent/dist'), { recursive: true });
  await runCommand(['cp', '-a', modules, path.join(app, 'node_modules')]);
  const space = path.join(rootfs, 'usr/local/bin/space');
  await writeFile(space, `#!/bin/sh\nexec ${imageAppDir}/node/bin/node ${imageAppDir}/packages/cli/dist/main.js "$@"\n`);
  await chmod(space, 0o755);
  const data = path.join(rootfs, imageDataDir.slice(1));
  await mkdir(data, { recursive: true, mode: 0o700 });
  if (recipe.uid) {
    await appendFile(path.join(rootfs, 'etc/passwd'), `space:x:${recipe.uid}:${recipe.uid}:SPACE:${imageDataDir}:/usr/sbin/nologin\n`);
    await appendFile(path.join(rootfs, 'etc/group'), `space:x:${recipe.uid}:\n`);
    await chown(data, recipe.uid, recipe.uid);
  }
}

/** npm as the host runs it, packed from the registry once into the cache. */
async function npmTarball(cacheDir: string): Promise<string> {
  const version = (await runCommand(['npm', '--version'])).stdout.trim();
  const tarball = path.join(cacheDir, `npm-${version}.tgz`);
  if (!existsSync(tarball)) {
    const packed = (await runCommand(['npm', 'pack', `npm@${version}`, '--pack-destination', cacheDir, '--silent'])).stdout.trim().split('\n').at(-1)!;
    await rename(path.join(cacheDir, packed), tarball);
  }
  return tarball;
}

/** The image's layers (compressed), read from its OCI layout. */
async function layersOf(layout: string, tag: string): Promise<{ digest: string; bytes: number }[]> {
  const blob = async (digest: string) => JSON.parse(await readFile(path.join(layout, 'blobs', ...digest.split(':')), 'utf8'));
  const index = JSON.parse(await readFile(path.join(layout, 'index.json'), 'utf8')) as {
    manifests: { digest: string; annotations?: Record<string, string> }[];
  };
  const entry = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  if (!entry) throw new Error(`${layout} has no image tagged ${tag}`);
  const manifest = (await blob(entry.digest)) as { layers: { digest: string; size: number }[] };
  return manifest.layers.map((l) => ({ digest: l.digest, bytes: l.size }));
}
