import type { Command } from 'commander';
import { maxJoinTokenTtlSec, maxJoinTokenUses } from '@space/protocol';
import type { DrainResultData, NodeData, Space } from '@space/sdk';
import { cliClient, output } from '../client.js';
import { nodeSelf } from '../node-self.js';

function table(nodes: NodeData[]): string {
  const rows = nodes.map(
    (n) =>
      `${n.id.padEnd(16)} ${n.status.padEnd(9)} ${n.storage.padEnd(9)} ${String(n.sessions).padStart(8)} ${String(n.sandboxes).padStart(9)}  ${n.lastHeartbeatAt}  ${n.url}`,
  );
  return [
    `${'node'.padEnd(16)} ${'status'.padEnd(9)} ${'storage'.padEnd(9)} ${'sessions'.padStart(8)} ${'sandboxes'.padStart(9)}  ${'last heartbeat'.padEnd(24)}  url`,
    ...rows,
  ].join('\n');
}

function drained(result: DrainResultData): string {
  return [
    `node ${result.nodeId} drained: ${result.moved.length} session(s) moved, ${result.failed.length} not`,
    ...result.moved.map((m) => `  ${m.sessionId} -> ${m.to}`),
    ...result.failed.map((f) => `  ${f.sessionId} not moved: ${f.code}: ${f.message}`),
    ...(result.failed.length ? ['drain again to retry those'] : []),
  ].join('\n');
}

/** `space nodes`, `space node drain|undrain|revoke NODE` and `space node join-token` (admin key): the cluster's nodes. */
export function registerNodeCommands(program: Command, node: Command): void {
  program
    .command('nodes')
    .description("the cluster's nodes: status, sessions, last heartbeat (admin key)")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const nodes = await cliClient(process.env).nodes.list();
      output(Boolean(opts.json), nodes, () => table(nodes));
    });
  node
    .command('drain [nodeId]')
    .description('move every session off a node through the object store; it takes no new sessions until "space node undrain"')
    .option('--self', "this host's node, with its own credential (no admin key): a node pod's preStop hook")
    .option('--json', 'print JSON')
    .action(async (nodeId: string | undefined, opts: { self?: boolean; json?: boolean }) => {
      const { id, client } = nodeAndClient(nodeId, opts);
      if (!opts.json) process.stderr.write(`draining ${id}: each session is checkpointed, shipped and moved to another node\n`);
      const result = await client.nodes.drain(id);
      output(Boolean(opts.json), result, () => drained(result));
      if (result.failed.length) process.exitCode = 1;
    });
  node
    .command('join-token')
    .description('a token for new nodes: start them with SPACE_NODE_JOIN_TOKEN=<token> (admin key)')
    .option('--ttl <seconds>', `how long it stays usable (60 to ${maxJoinTokenTtlSec})`, '3600')
    .option('--uses <n>', `how many nodes may join with it (1 to ${maxJoinTokenUses}; a Kubernetes DaemonSet's pods share one)`, '1')
    .option('--json', 'print JSON')
    .action(async (opts: { ttl: string; uses: string; json?: boolean }) => {
      const [ttlSec, uses] = [Number(opts.ttl), Number(opts.uses)];
      if (!Number.isInteger(ttlSec)) throw new Error(`--ttl must be a whole number of seconds, got ${JSON.stringify(opts.ttl)}`);
      if (!Number.isInteger(uses)) throw new Error(`--uses must be a whole number, got ${JSON.stringify(opts.uses)}`);
      const made = await cliClient(process.env).nodes.joinToken({ ttlSec, uses });
      output(Boolean(opts.json), made, () =>
        [
          made.token,
          `usable ${made.uses === 1 ? 'once' : `by ${made.uses} nodes`}, until ${made.expiresAt}: start a new node with SPACE_NODE_JOIN_TOKEN=${made.token} and SPACE_CONTROL_PLANE_URL;`,
          'each keeps the credential it is issued in $SPACE_DATA_DIR/node/credential',
        ].join('\n'),
      );
    });
  node
    .command('revoke <nodeId>')
    .description("revoke a node's credential: its heartbeats are refused, it fences itself, and its sessions move on once it is found lost")
    .option('--json', 'print JSON')
    .action(async (nodeId: string, opts: { json?: boolean }) => {
      const result = await cliClient(process.env).nodes.revokeCredential(nodeId);
      output(Boolean(opts.json), result, () =>
        result.revoked
          ? `revoked the credential of node ${nodeId}`
          : `node ${nodeId} has no credential to revoke (revoked already, or it heartbeats with the admin key)`,
      );
      if (!result.revoked) process.exitCode = 1;
    });
  node
    .command('undrain [nodeId]')
    .description('a drained node takes new sessions again')
    .option('--self', "this host's node, with its own credential (no admin key)")
    .option('--json', 'print JSON')
    .action(async (nodeId: string | undefined, opts: { self?: boolean; json?: boolean }) => {
      const { id, client } = nodeAndClient(nodeId, opts);
      const view = await client.nodes.undrain(id);
      output(Boolean(opts.json), view, () => table([view]));
    });
}

/** The node a drain or undrain names, and who asks: the admin key's client, or the node itself (`--self`). */
function nodeAndClient(nodeId: string | undefined, opts: { self?: boolean }): { id: string; client: Space } {
  if (opts.self) {
    if (nodeId) throw new Error(`--self names this host's node: leave out ${JSON.stringify(nodeId)}`);
    const self = nodeSelf(process.env);
    return { id: self.nodeId, client: self.client };
  }
  if (!nodeId) throw new Error('name the node (see "space nodes"), or --self on the node\'s own host');
  return { id: nodeId, client: cliClient(process.env) };
}
