/**
 * Where things are inside every sandbox: the contract between the node agent, which prepares the
 * sandbox, and the daemon, which runs in it.
 */
export const SandboxLayout = {
  /** The port the daemon listens on, inside the sandbox's network namespace. */
  daemonPort: 49983,
  /** The one-time channel token the node writes and the daemon reads, then deletes. */
  daemonTokenPath: '/run/space/daemon-token',
  /** The working directory of commands and relative paths. */
  workdir: '/workspace',
} as const;
