import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { findAptMirror, readNodeSettings } from '@space/node';
import { type BuiltImage, buildImage } from '../images/image-builder.js';
import { imageRecipes } from '../images/image-recipes.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

/** The images' tag: the CLI's version and the commit (`-dirty` for uncommitted changes), so a commit always gets the same one. */
function commitTag(): { tag: string; revision: string; created: string } {
  const git = (...args: string[]) => execFileSync('git', ['-C', repoRoot, ...args], { encoding: 'utf8' }).trim();
  const version = (JSON.parse(readFileSync(path.join(repoRoot, 'packages/cli/package.json'), 'utf8')) as { version: string }).version;
  try {
    const revision = git('rev-parse', 'HEAD');
    const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
    return { tag: `${version}-${revision.slice(0, 12)}${dirty ? '-dirty' : ''}`, revision, created: git('log', '-1', '--format=%cI') };
  } catch {
    throw new Error("not a git checkout: name the images' tag with --tag");
  }
}

function megabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** `./space image build`: SPACE's OCI images, from Debian's packages and this checkout's build. */
export function registerImageCommands(program: Command): void {
  const image = program.command('image').description("SPACE's container images (docs/kubernetes.md)");
  image
    .command('build')
    .description('build space-control-plane and space-node: OCI layouts and docker save archives (debootstrap, umoci, skopeo; root; no registry)')
    .option('--out <dir>', 'where the layouts and archives go', path.join(repoRoot, 'dist/images'))
    .option('--tag <tag>', "the images' tag (default: <version>-<commit>, -dirty with uncommitted changes)")
    .option('--only <name>', `one image: ${imageRecipes.map((r) => r.name).join(' or ')}`)
    .option('--json', 'print JSON')
    .action(async (opts: { out: string; tag?: string; only?: string; json?: boolean }) => {
      const recipes = imageRecipes.filter((r) => !opts.only || r.name === opts.only);
      if (recipes.length === 0) throw new Error(`--only takes ${imageRecipes.map((r) => r.name).join(' or ')}, got ${JSON.stringify(opts.only)}`);
      if (opts.tag !== undefined && !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(opts.tag))
        throw new Error(`--tag must be a valid image tag (letters, digits, _ . -; at most 128), got ${JSON.stringify(opts.tag)}`);
      const fromGit = opts.tag ? null : commitTag();
      const settings = readNodeSettings(process.env);
      const cacheDir = path.join(settings.dataDir, 'cache/images');
      const outDir = path.resolve(opts.out);
      mkdirSync(cacheDir, { recursive: true });
      mkdirSync(outDir, { recursive: true });
      const options = {
        repoRoot,
        nodeHome: path.dirname(path.dirname(process.execPath)),
        outDir,
        cacheDir,
        tag: opts.tag ?? fromGit!.tag,
        revision: fromGit?.revision ?? 'unknown',
        created: fromGit?.created ?? new Date().toISOString(),
        mirror: settings.debianMirror ?? (await findAptMirror('bookworm')),
        progress: (line: string) => process.stderr.write(`${line}\n`),
      };
      const built: BuiltImage[] = [];
      for (const recipe of recipes) built.push(await buildImage(recipe, options));
      if (opts.json) process.stdout.write(`${JSON.stringify({ images: built })}\n`);
      else
        for (const b of built)
          process.stdout.write(
            `${b.reference}: layers ${b.layers.map((l) => megabytes(l.bytes)).join(' + ')} compressed; ${b.archive} (${megabytes(b.archiveBytes)}); OCI layout ${b.layout}\n`,
          );
    });
}
