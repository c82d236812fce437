import type { Command } from 'commander';
import type { DrainResultData, NodeData } from '@space/sdk';
import { cliClient, output } from '../client.js';

function table(nodes: NodeData[]): string {
  const rows = nodes.map(
    (n) => `${n.id.padEnd(16)} ${n.status.padEnd(9)} ${String(n.sessions).padStart(8)} ${String(n.sandboxes).padStart(9)}  ${n.lastHeartbeatAt}  ${n.url}`,
  );
  return [`${'node'.padEnd(16)} ${'status'.padEnd(9)} ${'sessions'.padStart(8)} ${'sandboxes'.padStart(9)}  ${'last heartbeat'.padEnd(24)}  url`, ...rows].join(
    '\n',
  );
}

function drained(result: DrainResultData): string {
  return [
    `node ${result.nodeId} drained: ${result.moved.length} session(s) moved, ${result.failed.length} not`,
    ...result.moved.map((m) => `  ${m.sessionId} -> ${m.to}`),
    ...result.failed.map((f) => `  ${f.sessionId} not moved: ${f.code}: ${f.message}`),
    ...(result.failed.length ? ['drain again to retry those'] : []),
  ].join('\n');
}

/** `space nodes` and `space node drain|undrain NODE` (admin key): the cluster's nodes. */
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
    .command('drain <nodeId>')
    .description('move every session off a node through the object store; it takes no new sessions until "space node undrain"')
    .option('--json', 'print JSON')
    .action(async (nodeId: string, opts: { json?: boolean }) => {
      if (!opts.json) process.stderr.write(`draining ${nodeId}: each session is checkpointed, shipped and moved, one at a time\n`);
      const result = await cliClient(process.env).nodes.drain(nodeId);
      output(Boolean(opts.json), result, () => drained(result));
      if (result.failed.length) process.exitCode = 1;
    });
  node
    .command('undrain <nodeId>')
    .description('a drained node takes new sessions again')
    .option('--json', 'print JSON')
    .action(async (nodeId: string, opts: { json?: boolean }) => {
      const view = await cliClient(process.env).nodes.undrain(nodeId);
      output(Boolean(opts.json), view, () => table([view]));
    });
}
