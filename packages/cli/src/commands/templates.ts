import { createReadStream, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type { TemplateData } from '@space/sdk';
import { readBuildContext } from '../build-context.js';
import { cliClient, output, parseNameValues } from '../client.js';

function line(t: TemplateData): string {
  const origin = t.builtIn ? 'built-in' : `v${t.version} from ${t.source === 'checkpoint' ? t.fromCheckpoint : `a ${t.source}`} at ${t.createdAt}`;
  return `${t.name.padEnd(24)} ${origin.padEnd(60)} ${t.sessions} session(s)`;
}

/** template create/ls/rm: the tenant's templates, made from sessions and checkpoints. */
export function registerTemplateCommands(program: Command): void {
  const template = program.command('template').description('templates: the built-ins and your own, made from a session or checkpoint');
  template
    .command('create <name>')
    .description('make a template from a session (an fs checkpoint is taken first) or a checkpoint; a name made again gets a new version')
    .option('--from-session <session>', 'the session whose files become the template')
    .option('--from-checkpoint <checkpoint>', 'the checkpoint whose files become the template')
    .option('--json', 'print the template as JSON')
    .action(async (name: string, opts: { fromSession?: string; fromCheckpoint?: string; json?: boolean }) => {
      if (!opts.fromSession === !opts.fromCheckpoint) throw new Error('give one of --from-session and --from-checkpoint');
      const made = await cliClient(process.env).templates.create({ name, fromSession: opts.fromSession, fromCheckpoint: opts.fromCheckpoint });
      output(Boolean(opts.json), made, () => `template ${made.name} v${made.version} made from ${made.fromCheckpoint}`);
    });
  template
    .command('build <name> [context]')
    .description('build a template from a Dockerfile in a SPACE sandbox; follows the build log (steps that did not change come from the cache)')
    .option('-f, --file <dockerfile>', 'the Dockerfile (default: Dockerfile in the context directory)')
    .option('--build-arg <NAME=VALUE...>', "values of the Dockerfile's ARGs", [])
    .option('-s, --secret <name...>', 'secrets RUN steps may use through the gateway (never in the template)', [])
    .option('--timeout <seconds>', 'cancel the build after this long', (v) => Number(v))
    .option('--no-follow', 'start the build and print its id without waiting')
    .option('--json', 'print the build as JSON (the log goes to stderr)')
    .action(
      async (
        name: string,
        contextDir: string | undefined,
        opts: { file?: string; buildArg: string[]; secret: string[]; timeout?: number; follow: boolean; json?: boolean },
      ) => {
        const dir = contextDir ?? '.';
        const dockerfile = readFileSync(opts.file ?? path.join(dir, 'Dockerfile'), 'utf8');
        const { files, executables } = contextDir ? readBuildContext(dir, 64 * 1024 * 1024) : { files: {}, executables: [] };
        const space = cliClient(process.env);
        const build = await space.templates.build({
          name,
          dockerfile,
          files,
          executables,
          buildArgs: parseNameValues(opts.buildArg, '--build-arg'),
          secrets: opts.secret,
          timeoutSec: opts.timeout,
          timeoutMs: 120_000,
        });
        if (!opts.follow) return output(Boolean(opts.json), build, () => build.id);
        for await (const chunk of space.templates.buildLog(name, build.id)) (opts.json ? process.stderr : process.stdout).write(chunk);
        const done = await space.templates.getBuild(name, build.id);
        if (done.status !== 'succeeded') process.exitCode = 1;
        if (opts.json) output(true, done, () => '');
      },
    );
  template
    .command('import <name> [image]')
    .description('make a template from an image: a `docker save` archive or an OCI layout tar, or --from docker://REF where a registry is reachable')
    .option('--from <reference>', 'pull from a registry (docker://…) instead of an archive')
    .option('--json', 'print the template as JSON')
    .action(async (name: string, image: string | undefined, opts: { from?: string; json?: boolean }) => {
      if (!image === !opts.from) throw new Error('give an image archive or --from docker://REFERENCE');
      if (!opts.json) process.stderr.write(`importing ${image ?? opts.from}…\n`);
      const made = await cliClient(process.env).templates.import(name, image ? { archive: createReadStream(image) } : { image: opts.from! });
      output(
        Boolean(opts.json),
        made,
        () => `template ${made.name} v${made.version} imported${made.config?.cmd ? ` (its command: ${JSON.stringify(made.config.cmd)})` : ''}`,
      );
    });
  template
    .command('ls')
    .description('list the templates new sessions can start from')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const templates = await cliClient(process.env).templates.list();
      output(Boolean(opts.json), templates, () => templates.map(line).join('\n'));
    });
  template
    .command('rm <name>')
    .description('delete every version of one of your templates')
    .option('--force', 'even while sessions made from it exist (they keep their files)')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { force?: boolean; json?: boolean }) => {
      await cliClient(process.env).templates.delete(name, { force: opts.force });
      output(Boolean(opts.json), { deleted: name }, () => `deleted template ${name}`);
    });
}
