import { createHash } from 'node:crypto';
import { chmod, mkdir, readdir, rename, rm, symlink, writeFile, copyFile } from 'node:fs/promises';
import path from 'node:path';
import { runCommand } from '../run-command.js';
import { findAptMirror } from './apt-mirror.js';
import { chromiumInSandbox, desktopPackages, e2bDesktopPackages, e2bNoVncProxy } from './desktop-files.js';

export type Progress = (message: string) => void;

export interface TemplateRecipe {
  name: string;
  description: string;
  /** Everything that determines the result: a change here means a rebuild. */
  fingerprint: string;
  /** The template this one is built on: `root` starts as a writable snapshot of it (and a rebuild of it rebuilds this one). */
  from?: TemplateRecipe;
  /** Fills `root` (an empty directory, or a snapshot of `from`) with the template's filesystem. */
  build(root: string, progress: Progress, environment: RecipeEnvironment): Promise<void>;
}

/** What a build may use: a cache directory of its own that outlives it, and where Debian's packages come from. */
export interface RecipeEnvironment {
  cacheDir: string;
  /** `SPACE_DEBIAN_MIRROR`; null: the mirror of apt's own sources. */
  debianMirror: string | null;
  /** Aborted when the node stops: the build's long commands are killed with everything they started. */
  abort?: AbortSignal;
}

export function recipeHash(recipe: TemplateRecipe): string {
  return createHash('sha256')
    .update(recipe.from ? `${recipe.fingerprint}\nfrom ${recipeHash(recipe.from)}` : recipe.fingerprint)
    .digest('hex')
    .slice(0, 12);
}

const baseEtcPasswd = 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n';
const baseEtcGroup = 'root:x:0:\nnogroup:x:65534:\n';

/** Directories every template has: mount points, the daemon's token directory and the default working directory. */
async function addSandboxLayout(root: string): Promise<void> {
  for (const dir of ['proc', 'sys', 'dev', 'tmp', 'run/space', 'workspace', 'root', 'etc', '.space']) {
    await mkdir(path.join(root, dir), { recursive: true });
  }
  await chmod(path.join(root, 'tmp'), 0o1777);
}

const busyboxPaths = ['/bin/busybox', '/usr/bin/busybox'];

export const tinyRecipe: TemplateRecipe = {
  name: 'tiny',
  description: 'busybox (static) with its applets in /bin',
  fingerprint: 'tiny:v1:busybox-static',
  async build(root, progress) {
    await addSandboxLayout(root);
    await mkdir(path.join(root, 'bin'), { recursive: true });
    const source = await firstExisting(busyboxPaths);
    await copyFile(source, path.join(root, 'bin/busybox'));
    await chmod(path.join(root, 'bin/busybox'), 0o755);
    const { stdout } = await runCommand([path.join(root, 'bin/busybox'), '--list']);
    const applets = stdout.split('\n').filter((a) => a && a !== 'busybox');
    progress(`linking ${applets.length} busybox applets`);
    for (const applet of applets) await symlink('busybox', path.join(root, 'bin', applet)).catch(() => undefined);
    await mkdir(path.join(root, 'usr/bin'), { recursive: true });
    await symlink('/bin/env', path.join(root, 'usr/bin/env')).catch(() => undefined);
    await writeFile(path.join(root, 'etc/passwd'), baseEtcPasswd);
    await writeFile(path.join(root, 'etc/group'), baseEtcGroup);
  },
};

/** What an agent reaches for first: a shell, Python with pip and venv, Node, git, curl (npm comes from its registry). */
const basePackages = ['bash', 'coreutils', 'python3', 'python3-pip', 'python3-venv', 'nodejs', 'git', 'curl', 'ca-certificates', 'procps'];

/**
 * npm from the npm registry, not Debian's package: that one pulls in 350 packages and 294 MB
 * (webpack, eslint, libssl-dev, …; measured), this one 20 MB. npm 10: the newest that runs on
 * bookworm's Node 18.
 */
const baseNpm = 'npm@10.9.2';

/** Unpacks `baseNpm` (packed once into `cacheDir`) into `root`'s /usr/local, with `npm` and `npx` on the PATH. */
async function installNpm(root: string, cacheDir: string, progress: Progress): Promise<void> {
  const tarball = path.join(cacheDir, `${baseNpm.replace('@', '-')}.tgz`);
  if (!(await readdir(cacheDir)).includes(path.basename(tarball))) {
    progress(`fetching ${baseNpm} from the npm registry`);
    const packed = (await runCommand(['npm', 'pack', baseNpm, '--pack-destination', cacheDir, '--silent'])).stdout.trim().split('\n').at(-1)!;
    await rename(path.join(cacheDir, packed), tarball);
  }
  const lib = path.join(root, 'usr/local/lib/node_modules/npm');
  await mkdir(lib, { recursive: true });
  await runCommand(['tar', '-xzf', tarball, '-C', lib, '--strip-components=1', '--no-same-owner']);
  await mkdir(path.join(root, 'usr/local/bin'), { recursive: true });
  for (const tool of ['npm', 'npx']) {
    await chmod(path.join(lib, `bin/${tool}-cli.js`), 0o755);
    await symlink(`../lib/node_modules/npm/bin/${tool}-cli.js`, path.join(root, 'usr/local/bin', tool));
  }
}

/** A Debian bookworm template: debootstrap minbase with `packages`, npm from its registry, then `finish` on the tree. */
function debianRecipe(options: { name: string; description: string; fingerprint: string; packages: readonly string[] }): TemplateRecipe {
  return {
    name: options.name,
    description: options.description,
    fingerprint: options.fingerprint,
    async build(root, progress, { cacheDir, debianMirror, abort }) {
      const mirror = debianMirror ?? (await findAptMirror('bookworm'));
      await mkdir(cacheDir, { recursive: true });
      progress(`debootstrap bookworm from ${mirror} (${options.packages.length} packages and what they need; minutes the first time)`);
      await debootstrap(root, mirror, cacheDir, options.packages, progress, abort);
      await addSandboxLayout(root);
      await installNpm(root, cacheDir, progress);
      // A sandbox is the agent's own machine: `pip install` goes to the system's Python, as in a
      // container's, instead of refusing (PEP 668's marker); a venv still works as anywhere.
      for (const dir of (await readdir(path.join(root, 'usr/lib'))).filter((d) => /^python3\.\d+$/.test(d))) {
        await rm(path.join(root, 'usr/lib', dir, 'EXTERNALLY-MANAGED'), { force: true });
      }
      await removeAptCaches(root);
    },
  };
}

/** Package caches and lists only make a template bigger. */
async function removeAptCaches(root: string): Promise<void> {
  await runCommand(['rm', '-rf', path.join(root, 'var/cache/apt/archives'), path.join(root, 'var/lib/apt/lists')]);
  await mkdir(path.join(root, 'var/cache/apt/archives/partial'), { recursive: true });
  await mkdir(path.join(root, 'var/lib/apt/lists/partial'), { recursive: true });
}

/**
 * debootstrap prints a line per package and phase: each phase is reported the first time it
 * appears (they interleave, e.g. Retrieving/Validating per package) and a count every 50 steps.
 * Downloaded packages stay in `cacheDir`, so another template with the same packages fetches none again.
 */
export async function debootstrap(
  root: string,
  mirror: string,
  cacheDir: string,
  packages: readonly string[],
  progress: Progress,
  abort?: AbortSignal,
): Promise<void> {
  let steps = 0;
  const phases = new Set<string>();
  await runCommand(['debootstrap', '--variant=minbase', `--include=${packages.join(',')}`, `--cache-dir=${cacheDir}`, 'bookworm', root, mirror], {
    abort,
    onLine: (line) => {
      if (!line.startsWith('I: ')) return;
      const word = line.slice(3).split(' ')[0] ?? '';
      if (!phases.has(word)) {
        phases.add(word);
        progress(`debootstrap: ${line.slice(3).replace(/\.\.\.$/, '')}`);
      } else if (++steps % 50 === 0) {
        progress(`debootstrap: ${steps} steps`);
      }
    },
  });
}

export const baseRecipe = debianRecipe({
  name: 'base',
  description: `Debian bookworm (debootstrap minbase) with ${basePackages.join(', ')}, ${baseNpm}`,
  fingerprint: `base:v2:bookworm:minbase:pip-unmanaged:${baseNpm}:${basePackages.join(',')}`,
  packages: basePackages,
});

/** What the code interpreter's kernels and the usual data work need, all Debian's (no PyPI). */
const codeInterpreterPackages = [
  'python3-ipykernel',
  'python3-jupyter-client',
  'python3-numpy',
  'python3-pandas',
  'python3-matplotlib',
  'python3-scipy',
  'python3-pil',
  'fonts-dejavu-core',
];

/** Where a template says it has a code interpreter: the in-sandbox agent starts its server at boot when this exists. */
export const codeInterpreterMarker = 'etc/space/code-interpreter';

export const codeInterpreterRecipe: TemplateRecipe = {
  name: 'code-interpreter',
  description: `base, with an IPython kernel and ${codeInterpreterPackages.join(', ')}; the code interpreter's server starts with the sandbox`,
  fingerprint: `code-interpreter:v1:apt-no-recommends:${codeInterpreterPackages.join(',')}:agg:marker`,
  from: baseRecipe,
  async build(root, progress, { abort }) {
    await aptInstall(root, codeInterpreterPackages, progress, abort);
    await mkdir(path.join(root, path.dirname(codeInterpreterMarker)), { recursive: true });
    await writeFile(path.join(root, codeInterpreterMarker), 'python bash\n');
    // Charts render to images, never to a display the sandbox does not have: in kernels and scripts alike.
    await writeFile(path.join(root, 'etc/matplotlibrc'), 'backend: Agg\n');
    await removeAptCaches(root);
  },
};

/** Where a template says it has a desktop: the in-sandbox agent's desktop server answers only when this exists. */
export const desktopMarker = 'etc/space/desktop';

export const desktopRecipe: TemplateRecipe = {
  name: 'desktop',
  description: `base, with a desktop: ${desktopPackages.join(', ')}; for E2B Desktop's SDK also ${e2bDesktopPackages.join(', ')}; the display starts when a sandbox boots`,
  fingerprint: `desktop:v3:apt-no-recommends:${desktopPackages.join(',')}:${e2bDesktopPackages.join(',')}:novnc-proxy:${e2bNoVncProxy}:${chromiumInSandbox}:marker`,
  from: baseRecipe,
  async build(root, progress, { abort }) {
    await aptInstall(root, [...desktopPackages, ...e2bDesktopPackages], progress, abort);
    await mkdir(path.join(root, 'opt/noVNC/utils'), { recursive: true });
    await writeFile(path.join(root, 'opt/noVNC/utils/novnc_proxy'), e2bNoVncProxy, { mode: 0o755 });
    await writeFile(path.join(root, 'etc/chromium.d/space-sandbox'), chromiumInSandbox);
    await mkdir(path.join(root, path.dirname(desktopMarker)), { recursive: true });
    await writeFile(path.join(root, desktopMarker), 'xvfb xfwm4 chromium\n');
    await removeAptCaches(root);
  },
};

/**
 * apt-get install in the template itself, from the mirror its base was made from: Debian resolves
 * and orders the packages' configuration (debootstrap's --include, tried first, failed configuring
 * python3-zmq). No recommended packages: only what was asked for and what it needs.
 */
async function aptInstall(root: string, packages: readonly string[], progress: Progress, abort?: AbortSignal): Promise<void> {
  let fetched = 0;
  let configured = 0;
  const apt = (args: string[]) =>
    runCommand(['chroot', root, '/usr/bin/env', '-i', 'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'DEBIAN_FRONTEND=noninteractive', 'apt-get', '-q', ...args], {
      abort,
      onLine: (line) => {
        if (line.startsWith('Get:') && ++fetched % 25 === 0) progress(`apt-get: ${fetched} packages fetched`);
        if (line.startsWith('Setting up') && ++configured % 25 === 0) progress(`apt-get: ${configured} packages set up`);
      },
    });
  progress('apt-get update');
  await apt(['update']);
  progress(`apt-get install ${packages.join(' ')} (minutes the first time)`);
  await apt(['install', '-y', '--no-install-recommends', ...packages]);
  progress(`apt-get: ${configured} packages set up`);
}

export const builtinRecipes: readonly TemplateRecipe[] = [baseRecipe, tinyRecipe, codeInterpreterRecipe, desktopRecipe];

async function firstExisting(paths: string[]): Promise<string> {
  for (const p of paths) {
    const dir = path.dirname(p);
    const names = await readdir(dir).catch(() => [] as string[]);
    if (names.includes(path.basename(p))) return p;
  }
  throw new Error(`none of ${paths.join(', ')} exists; install busybox-static`);
}
