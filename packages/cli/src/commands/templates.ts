import type { Command } from 'commander';
import type { TemplateData } from '@space/sdk';
import { cliClient, output } from '../client.js';

function line(t: TemplateData): string {
  const origin = t.builtIn ? 'built-in' : `v${t.version} from ${t.fromCheckpoint} at ${t.createdAt}`;
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
