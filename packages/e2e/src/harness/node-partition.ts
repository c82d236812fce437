import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * A network partition between one node agent and every control plane, made with iptables on this
 * machine's loopback: the node's connections to the control planes' ports are dropped (matched by
 * the net_cls cgroup the node agent is moved into, which also tags the connections it already has
 * open), and so is everything to and from its node API port. The node process, its gateway and its
 * sandboxes stay alive, and everything else on the machine (the test's own calls) still gets through.
 * `heal` undoes all of it, and is safe to call more than once (from a test's `after`).
 */
export class NodePartition {
  private readonly mountDir: string;
  private readonly group: string;
  private readonly classid = '0x5ace0001';
  private rules: string[][] = [];

  constructor(dir: string) {
    this.mountDir = path.join(dir, 'net_cls');
    this.group = path.join(this.mountDir, 'space-partition');
  }

  cut(options: { nodePid: number; nodePort: number; controlPlanePorts: number[] }): void {
    mkdirSync(this.mountDir, { recursive: true });
    execFileSync('mount', ['-t', 'cgroup', '-o', 'net_cls', 'space-net-cls', this.mountDir]);
    mkdirSync(this.group, { recursive: true });
    writeFileSync(path.join(this.group, 'net_cls.classid'), this.classid);
    writeFileSync(path.join(this.group, 'cgroup.procs'), String(options.nodePid));
    this.rules = [
      ...options.controlPlanePorts.map((port) => [
        'OUTPUT',
        '-o',
        'lo',
        '-p',
        'tcp',
        '-m',
        'cgroup',
        '--cgroup',
        this.classid,
        '--dport',
        String(port),
        '-j',
        'DROP',
      ]),
      ['INPUT', '-i', 'lo', '-p', 'tcp', '--dport', String(options.nodePort), '-j', 'DROP'],
      ['OUTPUT', '-o', 'lo', '-p', 'tcp', '--sport', String(options.nodePort), '-j', 'DROP'],
    ];
    for (const [chain, ...rule] of this.rules) execFileSync('iptables', ['-I', chain!, ...rule]);
  }

  heal(): void {
    for (const [chain, ...rule] of this.rules) {
      try {
        execFileSync('iptables', ['-D', chain!, ...rule], { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
    this.rules = [];
    if (!existsSync(this.group)) return;
    // The node agent and what it started meanwhile go back to the root group (one may have exited
    // since); a child forked while they move lands in the group, so until the group is empty.
    for (let round = 0; ; round++) {
      for (const pid of readFileSync(path.join(this.group, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          writeFileSync(path.join(this.mountDir, 'cgroup.procs'), pid);
        } catch {
          // exited
        }
      }
      try {
        rmdirSync(this.group);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || round >= 100) throw err;
        execFileSync('sleep', ['0.02']);
      }
    }
    execFileSync('umount', [this.mountDir]);
    rmdirSync(this.mountDir);
  }
}
