import type { Command } from 'commander';
import path from 'node:path';
import { resolveAdminKey } from '../admin-key.js';
import { LocalCluster } from '../cluster/local-cluster.js';
import { createClusterCa, readControlPlaneSettings } from '@space/control-plane';

function count(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 16) throw new Error(`--${name} must be a whole number from 1 to 16, got ${JSON.stringify(value)}`);
  return n;
}

/** `space cluster up`: a whole cluster on this machine, in the foreground until Ctrl-C. */
export function registerClusterCommands(program: Command): void {
  const cluster = program.command('cluster').description('a local cluster on this machine: PostgreSQL, control planes and node agents; the cluster CA');
  cluster
    .command('ca')
    .description("the cluster CA, which signs node APIs' certificates")
    .command('init')
    .description('make a cluster CA in --dir (ca.key, root only, and ca.crt) unless one is there; give every control plane SPACE_CLUSTER_CA_DIR=<dir>')
    .option('--dir <dir>', 'where to keep it', '/etc/space/cluster-ca')
    .option('--json', 'print JSON')
    .action(async (opts: { dir: string; json?: boolean }) => {
      const dir = path.resolve(opts.dir);
      const created = await createClusterCa(dir);
      const result = { dir, created, certificate: path.join(dir, 'ca.crt') };
      if (opts.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else
        process.stdout.write(
          `${created ? 'made a cluster CA' : 'a cluster CA is there already'} in ${dir}: copy the directory to every control plane (SPACE_CLUSTER_CA_DIR=${dir}); nodes that join from now on serve their node API over HTTPS with a certificate of it\n`,
        );
    });
  cluster
    .command('up')
    .description('run PostgreSQL, M control planes (ports from SPACE_PORT) and N node agents in the foreground; Ctrl-C stops them all')
    .option('--nodes <n>', 'node agents', '3')
    .option('--control-planes <n>', 'control planes', '2')
    .option('--json', 'print the cluster (URLs, nodes, pid files) as JSON once it is up')
    .action(async (opts: { nodes: string; controlPlanes: string; json?: boolean }) => {
      const settings = readControlPlaneSettings(process.env);
      const dataDir = path.resolve(settings.dataDir);
      const adminKey = await resolveAdminKey(dataDir, settings.apiKey, (line) => process.stderr.write(`${line}\n`));
      const local = new LocalCluster({
        dataDir,
        nodes: count(opts.nodes, 'nodes'),
        controlPlanes: count(opts.controlPlanes, 'control-planes'),
        port: settings.port,
        adminKey,
        output: (member, line) => process.stderr.write(`[${member}] ${line}\n`),
      });
      let stopping = false;
      const stop = async (code: number) => {
        if (stopping) return;
        stopping = true;
        process.stderr.write('stopping the cluster: nodes first (their sandboxes stop, their storage is unmounted), then control planes and PostgreSQL\n');
        await local.stop();
        process.exit(code);
      };
      process.on('SIGINT', () => void stop(0));
      process.on('SIGTERM', () => void stop(0));
      try {
        await local.start((message) => process.stderr.write(`cluster: ${message}\n`));
      } catch (err) {
        process.stderr.write(`cluster: cannot start: ${(err as Error).message}\n`);
        await stop(1);
        return;
      }
      const nodes = local.nodeNames.map((name) => ({ id: name, pidFile: local.member(name)?.pidFile ?? null }));
      if (opts.json) process.stdout.write(`${JSON.stringify({ controlPlanes: local.controlPlaneUrls, nodes, dataDir: local.root })}\n`);
      else {
        process.stdout.write(`SPACE cluster is up. Control planes: ${local.controlPlaneUrls.join(' ')}\n`);
        for (const node of nodes) process.stdout.write(`  ${node.id}: pid file ${node.pidFile}\n`);
        process.stdout.write('Ctrl-C stops it.\n');
      }
    });
}
