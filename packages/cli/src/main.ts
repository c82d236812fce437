#!/usr/bin/env node
import { Command } from 'commander';
import { up } from './commands/up.js';
import { nodeOnly } from './commands/node.js';
import { controlPlaneOnly } from './commands/control-plane.js';
import { registerSessionCommands } from './commands/sessions.js';
import { registerExecCommands } from './commands/exec.js';
import { registerRunCodeCommand } from './commands/run-code.js';
import { registerCheckpointCommands } from './commands/checkpoints.js';
import { registerCheckpointFileCommands } from './commands/checkpoint-files.js';
import { registerShellCommand } from './commands/shell.js';
import { registerDesktopCommands } from './commands/desktop.js';
import { registerEgressCommands } from './commands/egress.js';
import { registerLimitsCommand } from './commands/limits.js';
import { registerUsageCommand } from './commands/usage.js';
import { registerTemplateCommands } from './commands/templates.js';
import { registerVolumeCommands } from './commands/volumes.js';
import { registerMcpCommand } from './commands/mcp.js';
import { registerClusterCommands } from './commands/cluster.js';
import { registerNodeCommands } from './commands/nodes.js';
import { registerKubernetesCommands } from './commands/kubernetes.js';
import { registerImageCommands } from './commands/image.js';
import { describeError } from './client.js';

const program = new Command();
program.name('space').description('SPACE: sandboxes for AI agents whose sessions outlive them').showHelpAfterError().enablePositionalOptions();

program.command('up').description('run the node agent and control plane in the foreground').action(up);
const node = program
  .command('node')
  .description('run only the node agent (node API on SPACE_NODE_HOST:SPACE_NODE_PORT); or drain/undrain one')
  .action(nodeOnly);
program
  .command('control-plane')
  .description('run only the control plane, using the node at SPACE_NODE_URL and nodes that register themselves')
  .action(controlPlaneOnly);

registerSessionCommands(program);
registerExecCommands(program);
registerRunCodeCommand(program);
registerCheckpointCommands(program);
registerCheckpointFileCommands(program);
registerShellCommand(program);
registerDesktopCommands(program);
registerEgressCommands(program);
registerLimitsCommand(program);
registerUsageCommand(program);
registerTemplateCommands(program);
registerVolumeCommands(program);
registerMcpCommand(program);
registerClusterCommands(program);
registerNodeCommands(program, node);
registerKubernetesCommands(program);
registerImageCommands(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`space: ${describeError(err)}\n`);
  process.exit(1);
});
