import type { SandboxSpec } from './driver.js';

/**
 * The host tasks a sandbox may use: the session's `pids` bound its processes inside (RLIMIT_NPROC,
 * so fork fails with EAGAIN there), and each costs gVisor host tasks (measured: 300 `sleep`s took
 * 2,277 beyond the idle sandbox's 50, about 7.6 each). This is the backstop, above what `pids`
 * processes inside use, so it is never what a program runs into (a host limit kills the sandbox).
 */
export function hostTaskLimit(pids: number): number {
  return pids * 10 + 256;
}

/** The OCI runtime spec for one sandbox. */
export function buildOciSpec(spec: SandboxSpec): Record<string, unknown> {
  const { resources } = spec;
  return {
    ociVersion: '1.0.0',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: spec.args,
      env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
      cwd: '/',
      capabilities: defaultCapabilities(),
      rlimits: [
        { type: 'RLIMIT_NOFILE', hard: 65536, soft: 65536 },
        { type: 'RLIMIT_NPROC', hard: resources.pids, soft: resources.pids },
      ],
    },
    root: { path: spec.rootfs, readonly: false },
    hostname: spec.hostname,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      // gVisor puts a tmpfs on /tmp unless the spec mounts something there; binding the volume's
      // own /tmp keeps it on disk, so it survives resumes and is part of checkpoints.
      { destination: '/tmp', type: 'bind', source: `${spec.rootfs}/tmp`, options: ['rbind', 'rw'] },
      { destination: '/.space', type: 'bind', source: spec.runtimeDir, options: ['rbind', 'ro'] },
      ...spec.mounts.map((m) => ({ destination: m.destination, type: 'bind', source: m.source, options: ['rbind', m.readOnly ? 'ro' : 'rw'] })),
    ],
    linux: {
      cgroupsPath: `/space/${spec.sandboxId}`,
      namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network', path: spec.netnsPath }],
      resources: {
        memory: { limit: resources.memoryMb * 1024 * 1024 },
        cpu: { quota: Math.round(resources.cpus * 100_000), period: 100_000, ...(spec.cpuShares ? { shares: spec.cpuShares } : {}) },
        pids: { limit: hostTaskLimit(resources.pids) },
      },
    },
  };
}

/**
 * Docker's default set, plus CAP_SYS_ADMIN for the sandbox's init alone: space-init drops it before
 * starting the daemon, and keeps it only to rename the sandbox (sethostname) when a clone restored
 * from a memory image is bound to a new session.
 */
function defaultCapabilities(): Record<string, string[]> {
  const caps = [
    'CAP_CHOWN',
    'CAP_DAC_OVERRIDE',
    'CAP_FSETID',
    'CAP_FOWNER',
    'CAP_MKNOD',
    'CAP_NET_RAW',
    'CAP_SETGID',
    'CAP_SETUID',
    'CAP_SETFCAP',
    'CAP_SETPCAP',
    'CAP_NET_BIND_SERVICE',
    'CAP_SYS_CHROOT',
    'CAP_KILL',
    'CAP_AUDIT_WRITE',
    'CAP_SYS_ADMIN',
  ];
  return { bounding: caps, effective: caps, inheritable: caps, permitted: caps };
}
