import type { Command } from 'commander';
import type { TenantLimitsData } from '@space/sdk';
import { cliClient, output } from '../client.js';

function amount(name: string, value: number): string {
  return name === 'checkpointStorageBytes' ? `${(value / 1024 ** 3).toFixed(2)} GB` : String(value);
}

function table(view: TenantLimitsData): string {
  const rows = Object.entries(view.limits).map(
    ([name, l]) => `${name.padEnd(24)} ${`${amount(name, l!.used)} / ${amount(name, l!.max)}`.padEnd(24)} ${l!.setting}`,
  );
  return [
    `${'limit'.padEnd(24)} ${'used / max'.padEnd(24)} raised with`,
    ...rows,
    `default disk per session: ${view.defaultDiskGb} GB (SPACE_SESSION_DISK_GB)`,
  ].join('\n');
}

/** limits: what the tenant may keep and do, and what it uses now. */
export function registerLimitsCommand(program: Command): void {
  program
    .command('limits')
    .description("the tenant's limits, what it uses of each, and the setting that raises each")
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const view = await cliClient(process.env).limits();
      output(Boolean(opts.json), view, () => table(view));
    });
}
