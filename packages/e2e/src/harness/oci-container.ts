import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { hasExited } from '@space/server-kit';

export type RuntimeSpec = any;

/** Linux's capabilities in number order (capability.h): what a Kubernetes `privileged: true` pod holds. */
const capabilityNames = [
  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'LINUX_IMMUTABLE',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_ADMIN',
  'NET_RAW',
  'IPC_LOCK',
  'IPC_OWNER',
  'SYS_MODULE',
  'SYS_RAWIO',
  'SYS_CHROOT',
  'SYS_PTRACE',
  'SYS_PACCT',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_NICE',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'MKNOD',
  'LEASE',
  'AUDIT_WRITE',
  'AUDIT_CONTROL',
  'SETFCAP',
  'MAC_OVERRIDE',
  'MAC_ADMIN',
  'SYSLOG',
  'WAKE_ALARM',
  'BLOCK_SUSPEND',
  'AUDIT_READ',
  'PERFMON',
  'BPF',
  'CHECKPOINT_RESTORE',
];
/** Those in this process's bounding set: a container cannot hold more than its runtime has. */
const boundingSet = BigInt(`0x${/CapBnd:\s+([0-9a-f]+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]}`);
const allCapabilities = capabilityNames.filter((_, bit) => (boundingSet >> BigInt(bit)) & 1n).map((c) => `CAP_${c}`);

/** Unpacks image `tag` of an OCI layout into a runtime bundle (`config.json` from the image's config, `rootfs`). */
export function unpackBundle(layout: string, tag: string, bundle: string): void {
  execFileSync('umoci', ['unpack', '--image', `${layout}:${tag}`, bundle], { stdio: 'pipe' });
}

/** Edits a bundle's runtime spec. */
export function editSpec(bundle: string, edit: (spec: RuntimeSpec) => void): void {
  const file = path.join(bundle, 'config.json');
  const spec = JSON.parse(readFileSync(file, 'utf8'));
  edit(spec);
  writeFileSync(file, JSON.stringify(spec, null, 2));
}

/** The host's network (no network namespace), no terminal, more environment. */
export function hostNetwork(spec: RuntimeSpec, env: Record<string, string>): void {
  spec.process.terminal = false;
  spec.process.env.push(...Object.entries(env).map(([k, v]) => `${k}=${v}`));
  spec.linux.namespaces = spec.linux.namespaces.filter((n: { type: string }) => n.type !== 'network');
  // The cgroup filesystem is not mounted into the container: this host's cgroups are hybrid (see runContainer).
  spec.mounts = spec.mounts.filter((m: { destination: string }) => m.destination !== '/sys/fs/cgroup');
}

/**
 * As a Kubernetes `privileged: true` pod with the host's `/dev` and the data directory as hostPath
 * volumes: every capability, no seccomp filter, the host's devices and sysfs (with its cgroups).
 */
export function privileged(spec: RuntimeSpec, binds: Record<string, string>): void {
  for (const set of ['bounding', 'effective', 'permitted', 'inheritable', 'ambient']) spec.process.capabilities[set] = allCapabilities;
  spec.process.noNewPrivileges = false;
  delete spec.linux.seccomp;
  spec.linux.maskedPaths = [];
  spec.linux.readonlyPaths = [];
  spec.mounts = spec.mounts.filter((m: { destination: string }) => !m.destination.startsWith('/dev') && !m.destination.startsWith('/sys'));
  spec.mounts.push(
    { destination: '/dev', type: 'bind', source: '/dev', options: ['rbind', 'rw'] },
    { destination: '/sys', type: 'bind', source: '/sys', options: ['rbind', 'rw'] },
    { destination: '/run', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=755'] },
    ...Object.entries(binds).map(([destination, source]) => ({ destination, type: 'bind', source, options: ['rbind', 'rw'] })),
  );
}

export interface Container {
  process: ChildProcess;
  /** Everything the container printed so far. */
  output(): string;
  /** Resolves with the first group of `pattern` in its output (or rejects when it exits or `ms` pass). */
  waitFor(pattern: RegExp, ms: number): Promise<string>;
  /** SIGTERM (forwarded to the container's first process by crun), then its exit code. */
  stop(ms?: number): Promise<number | null>;
}

/**
 * Runs a bundle with crun, as Kubernetes' runtimes would. crun 1.8 refuses a host whose cgroups are
 * hybrid with a controller enabled in the v2 hierarchy (this machine's: hugetlb), so it runs in a
 * mount namespace of its own without that hierarchy: the host is not changed, and crun manages no
 * cgroup (`--cgroup-manager=disabled`; the node's sandboxes make their own).
 */
export function runContainer(bundle: string, id: string): Container {
  const child = spawn(...crun(['run', '--bundle', bundle, id]), { stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const listeners = new Set<() => void>();
  const take = (chunk: Buffer) => {
    text += chunk.toString();
    if (text.length > 2_000_000) text = text.slice(-1_000_000);
    for (const l of listeners) l();
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    process: child,
    output: () => text,
    waitFor(pattern, ms) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(text);
          if (match) done(() => resolve(match[1] ?? match[0]));
        };
        const timer = setTimeout(() => done(() => reject(new Error(`${id}: no ${pattern} within ${ms} ms:\n${text.slice(-4000)}`))), ms);
        const onExit = () => done(() => reject(new Error(`${id} exited (${child.exitCode}) before ${pattern}:\n${text.slice(-4000)}`)));
        const done = (then: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off('exit', onExit);
          then();
        };
        listeners.add(check);
        child.once('exit', onExit);
        check();
      });
    },
    async stop(ms = 60_000) {
      if (!hasExited(child)) child.kill('SIGTERM');
      // Past `ms`, every process of the container is killed and crun's record of it removed.
      const timer = setTimeout(() => execFileSync(...crun(['delete', '--force', id]), { stdio: 'ignore' }), ms);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Runs a command in a running container (`crun exec`), as a Kubernetes exec hook does. */
export function execInContainer(id: string, argv: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(...crun(['exec', id, ...argv]), { encoding: 'utf8' });
}

/** `crun <args>` in a mount namespace of its own without the cgroup v2 hierarchy (see runContainer). */
function crun(args: string[]): [string, string[]] {
  const script = 'umount /sys/fs/cgroup/unified 2>/dev/null; exec crun --cgroup-manager=disabled "$@"';
  return ['unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, 'crun', ...args]];
}
