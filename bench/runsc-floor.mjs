// Bare runsc, with no SPACE around it: the floor a benchmark compares SPACE's own paths with, in the
// same run. A container of a template's rootfs (read-only, no network, no cgroup of its own) run,
// checkpointed and restored by hand. RUNSC_DEBUG=<dir> keeps runsc's debug logs there (gVisor
// times its save and load phases in them).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The rootfs of `template`'s current build under `dataDir`. */
export function templateRootfs(dataDir, template) {
  const templates = path.join(dataDir, 'btrfs/templates');
  const dir = readdirSync(templates).find((d) => d.startsWith(`${template}@`));
  if (!dir) throw new Error(`no ${template} template under ${templates}: start the platform once first`);
  return path.join(templates, dir);
}

/** The pids of the processes whose command line names `stateRoot`: every runsc process (Sentry, gofer, stubs) of its containers. */
function processesNaming(stateRoot) {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(stateRoot);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

/**
 * A bundle running `args` in `rootfs` with `/mnt` bound to a host directory the caller reads (how a
 * process inside says it is ready). `dispose()` removes the containers it ran and its directories.
 */
export function bareRunsc(rootfs, args, { platform = 'ptrace' } = {}) {
  const bundle = mkdtempSync('/tmp/space-bench-bundle-');
  const stateRoot = mkdtempSync('/tmp/space-bench-runsc-');
  const out = mkdtempSync('/tmp/space-bench-out-');
  const spec = {
    ociVersion: '1.0.0',
    process: { user: { uid: 0, gid: 0 }, args, env: ['PATH=/usr/bin:/bin'], cwd: '/' },
    root: { path: rootfs, readonly: true },
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/tmp', type: 'tmpfs', source: 'tmpfs' },
      { destination: '/mnt', type: 'bind', source: out, options: ['rbind', 'rw'] },
    ],
    linux: { namespaces: [{ type: 'pid' }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'network' }] },
  };
  writeFileSync(path.join(bundle, 'config.json'), JSON.stringify(spec));
  const ids = new Set();
  const runsc = (...command) =>
    execFileSync(
      'runsc',
      [
        `--root=${stateRoot}`,
        `--platform=${platform}`,
        '--network=none',
        ...(process.env.RUNSC_DEBUG ? ['--debug', `--debug-log=${process.env.RUNSC_DEBUG}/`] : []),
        ...command,
      ],
      { stdio: 'ignore' },
    );
  return {
    out,
    /** The pids of these containers' processes. */
    pids: () => processesNaming(stateRoot),
    /** `runsc run --detach`; milliseconds. */
    run(id) {
      ids.add(id);
      return timedSync(() => runsc('run', '--detach', `--bundle=${bundle}`, id));
    },
    /** `runsc run` until the process exits; milliseconds. */
    runToEnd(id) {
      ids.add(id);
      return timedSync(() => runsc('run', `--bundle=${bundle}`, id));
    },
    /** `runsc checkpoint --leave-running` into `imageDir`; milliseconds. */
    checkpoint(id, imageDir) {
      return timedSync(() => runsc('checkpoint', `--image-path=${imageDir}`, '--compression=none', '--leave-running', id));
    },
    /** `runsc restore --detach` of `imageDir` as a new container; milliseconds. */
    restore(id, imageDir) {
      ids.add(id);
      return timedSync(() => runsc('restore', '--detach', `--bundle=${bundle}`, `--image-path=${imageDir}`, id));
    },
    delete(id) {
      runsc('delete', '--force', id);
      ids.delete(id);
    },
    dispose() {
      for (const id of ids) {
        try {
          runsc('delete', '--force', id);
        } catch {
          // already gone
        }
      }
      // One runsc could not delete would run on with its state directory gone (runsc 20240729 finds
      // a container by a prefix of its id: `idle-1` is ambiguous beside `idle-10`, and refused).
      for (const pid of processesNaming(stateRoot)) process.kill(pid, 'SIGKILL');
      for (const dir of [bundle, stateRoot, out]) rmSync(dir, { recursive: true, force: true });
    },
  };
}

function timedSync(fn) {
  const t = performance.now();
  fn();
  return performance.now() - t;
}
