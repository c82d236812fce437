import { AbsoluteSandboxPathSchema, type Command, type Service, type TemplateConfig } from '@space/protocol';

/** A shell word: quoted unless it is plainly safe. */
function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The command as a shell would read it (argv words quoted). */
export function shellCommand(command: Command): string {
  return typeof command === 'string' ? command : command.map(shellQuote).join(' ');
}

/**
 * The command run as `user` (a name or uid, `:group` ignored): through `su`, which Debian's
 * util-linux and busybox both have and which root runs without a password. Root: as it is.
 */
export function runAs(user: string, command: Command): Command {
  const name = user.split(':')[0]!;
  if (name === '' || name === 'root' || name === '0') return typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
  return ['su', '-s', '/bin/sh', '-c', shellCommand(command), name];
}

/** The name of the service a template's CMD becomes. */
export const templateCommandService = 'cmd';

/** A template's WORKDIR as a session's default working directory; null (the workspace) for none or `/`. */
function defaultCwd(config: TemplateConfig): string | null {
  return config.workdir !== '/' && AbsoluteSandboxPathSchema.safeParse(config.workdir).success ? config.workdir : null;
}

/**
 * What a new session made from a template starts with: the template's ENV under the session's own
 * variables, its WORKDIR as where processes run without a cwd, and its CMD (as its USER, in its
 * WORKDIR) as the service `cmd` unless the session declares a service of that name itself.
 */
export function applyTemplateConfig(
  config: TemplateConfig | null,
  env: Record<string, string>,
  services: Service[],
): { env: Record<string, string>; services: Service[]; cwd: string | null } {
  if (!config) return { env, services, cwd: null };
  const merged = { ...config.env, ...env };
  const cwd = defaultCwd(config);
  if (!config.cmd || services.some((s) => s.name === templateCommandService)) return { env: merged, services, cwd };
  const port = config.expose[0];
  const cmdService: Service = {
    name: templateCommandService,
    cmd: runAs(config.user, config.cmd),
    ...(config.workdir && config.workdir !== '/' ? { cwd: config.workdir } : {}),
    ...(port ? { port } : {}),
  };
  return { env: merged, services: [cmdService, ...services], cwd };
}
