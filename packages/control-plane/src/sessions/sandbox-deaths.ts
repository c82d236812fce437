/** How a sandbox ends when something in it (or a limit of its host) took it down, not the platform's or the caller's choice. */
export const sandboxDeaths = ['died', 'oom', 'pids', 'unresponsive'] as const;
export type SandboxDeath = (typeof sandboxDeaths)[number];

export function isSandboxDeath(reason: unknown): reason is SandboxDeath {
  return (sandboxDeaths as readonly unknown[]).includes(reason);
}
