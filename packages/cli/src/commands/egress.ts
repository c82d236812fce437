import type { Command } from 'commander';
import type { EgressAuditEntry, EgressPolicy, SecretGrant } from '@space/sdk';
import { cliClient, output } from '../client.js';

export interface EgressFlags {
  denyAll?: boolean;
  allowAll?: boolean;
  allowDomain?: string[];
  allowCidr?: string[];
}

/** Adds the policy flags shared by `create` and `egress`. */
export function egressOptions(command: Command): Command {
  return command
    .option('--deny-all', 'egress: nothing outside is reachable')
    .option('--allow-all', 'egress: every public address (the default)')
    .option('--allow-domain <pattern...>', 'egress: only these domains (*.example.com for names below)')
    .option('--allow-cidr <cidr...>', 'egress: only these networks (with --allow-domain: either)');
}

/** The policy the flags describe, or undefined when none was given. */
export function policyFromFlags(flags: EgressFlags): Partial<EgressPolicy> | undefined {
  const lists = (flags.allowDomain?.length ?? 0) + (flags.allowCidr?.length ?? 0) > 0;
  const chosen = [flags.denyAll, flags.allowAll, lists].filter(Boolean).length;
  if (chosen > 1) throw new Error('choose one of --deny-all, --allow-all, or --allow-domain/--allow-cidr');
  if (flags.denyAll) return { mode: 'deny-all' };
  if (flags.allowAll) return { mode: 'allow-all' };
  if (lists) return { mode: 'allow-list', domains: flags.allowDomain ?? [], cidrs: flags.allowCidr ?? [] };
  return undefined;
}

/** The secrets `--secret` flags name: `NAME`, or `NAME=SECRET` for the secret SECRET under env var NAME. */
export function secretGrantsFrom(flags: string[]): SecretGrant[] {
  return flags.map((flag) => {
    const [name, secret, ...rest] = flag.split('=');
    if (rest.length > 0 || !name || secret === '') throw new Error(`--secret ${flag}: expected NAME or NAME=SECRET`);
    return secret === undefined ? name : { name, secret };
  });
}

function describePolicy(policy: EgressPolicy): string {
  if (policy.mode !== 'allow-list') return policy.mode;
  return `allow-list: ${[...policy.domains, ...policy.cidrs].join(', ')}`;
}

function auditLine(e: EgressAuditEntry): string {
  const secrets = e.secrets.length ? ` secrets=${e.secrets.join(',')}` : '';
  return `${e.time} ${e.decision.padEnd(7)} ${e.status} ${e.method} ${e.scheme}://${e.host}${e.path} ↑${e.bytesSent} ↓${e.bytesReceived} ${e.durationMs}ms${secrets}${e.reason ? `  (${e.reason})` : ''}`;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** secrets set/ls/rm, egress, egress-log. */
export function registerEgressCommands(program: Command): void {
  const secrets = program.command('secrets').description("the tenant's secrets: injected by the gateway, never inside a sandbox");
  secrets
    .command('set <name>')
    .description('create or rotate a secret; the value is read from stdin unless --from-env names a variable')
    .requiredOption('--host <pattern...>', 'hosts the value may be sent to (*.example.com for names below)')
    .option('--from-env <var>', 'take the value from this environment variable')
    .option('--json', 'print the secret (never its value) as JSON')
    .action(async (name: string, opts: { host: string[]; fromEnv?: string; json?: boolean }) => {
      let value: string | undefined;
      if (opts.fromEnv) {
        value = process.env[opts.fromEnv];
        if (!value) throw new Error(`environment variable ${opts.fromEnv} is empty or not set`);
      } else {
        if (process.stdin.isTTY) process.stderr.write(`value of ${name} (end with Ctrl-D): `);
        value = await readStdin();
      }
      const secret = await cliClient(process.env).secrets.set(name, { value, hosts: opts.host });
      output(
        Boolean(opts.json),
        secret,
        () =>
          `${secret.name} set for ${secret.hosts.join(', ')}; sandboxes of sessions created with --secret ${secret.name} see $${secret.name}=${secret.placeholder}`,
      );
    });
  secrets
    .command('ls')
    .description('list secrets (names, hosts, placeholders; never values)')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const list = await cliClient(process.env).secrets.list();
      output(Boolean(opts.json), list, () =>
        list.length ? list.map((s) => `${s.name}  ${s.hosts.join(',')}  updated ${s.updatedAt}`).join('\n') : 'no secrets',
      );
    });
  secrets
    .command('revoke <session> <name>')
    .description("take a secret from one session only (not its parent, forks or the tenant's secret); its gateway injects it no more")
    .option('--json', 'print the session as JSON')
    .action(async (id: string, name: string, opts: { json?: boolean }) => {
      const session = await cliClient(process.env).sessions.handle(id).revokeSecret(name);
      output(Boolean(opts.json), session.data, () => `revoked ${name} from ${id}`);
    });
  secrets
    .command('rm <name>')
    .description('delete a secret; sessions using it keep an unresolved placeholder')
    .option('--json', 'print JSON')
    .action(async (name: string, opts: { json?: boolean }) => {
      await cliClient(process.env).secrets.delete(name);
      output(Boolean(opts.json), { deleted: name }, () => `deleted secret ${name}`);
    });

  egressOptions(program.command('egress <session>').description("show or change a session's egress policy (applies to its next request)"))
    .option('--json', 'print the session as JSON')
    .action(async (id: string, opts: EgressFlags & { json?: boolean }) => {
      const handle = cliClient(process.env).sessions.handle(id);
      const policy = policyFromFlags(opts);
      // One call either way: the change answers with the session, a plain look fetches it.
      const session = policy ? await handle.setEgress(policy) : await handle.refresh();
      output(Boolean(opts.json), session.data, () => `${session.id} egress: ${describePolicy(session.data.egress)}`);
    });

  program
    .command('egress-log <session>')
    .description('the newest requests the session sent out through the gateway')
    .option('-n, --limit <count>', 'how many (at most 1000)', (v) => Number(v), 50)
    .option('--json', 'print JSON')
    .action(async (id: string, opts: { limit: number; json?: boolean }) => {
      const entries = await cliClient(process.env).sessions.handle(id).egressLog({ limit: opts.limit });
      output(Boolean(opts.json), entries, () => (entries.length ? entries.map(auditLine).join('\n') : 'no egress requests yet'));
    });
}
