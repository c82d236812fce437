import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type LocalPostgres, createClusterCa, startLocalPostgres } from '@space/control-plane';
import { startLoopbackS3 } from '@space/node';
import { signalAndWait } from '@space/server-kit';

/** The CLI's entry point, which runs every member of the cluster. */
const cliMain = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'main.js');

export interface LocalClusterOptions {
  /** Everything the cluster keeps: `<dataDir>/cluster/` (one directory per node and for the control planes, pid files), PostgreSQL aside (`postgresDir`). */
  dataDir: string;
  nodes: number;
  controlPlanes: number;
  /** The first control plane's port; the others follow it. */
  port: number;
  adminKey: string;
  /** Settings given to every member (templates, pool size, ...) on top of this process's environment. */
  env?: Record<string, string>;
  /** Remove `dataDir` and PostgreSQL's data when the cluster stops: for tests, on a data directory of their own. Default false. */
  removeDataOnStop?: boolean;
  /** Each member's output line by line, with its name. */
  output?: (member: string, line: string) => void;
}

export interface ClusterMember {
  name: string;
  process: ChildProcess;
  pidFile: string;
}

const readyWithin = 600_000;

/** Where the cluster of data directory `dataDir` keeps its PostgreSQL's data (see `LocalCluster.postgresDir`). */
export function clusterPostgresDir(dataDir: string): string {
  return path.join('/var/lib/postgresql/space-clusters', createHash('sha256').update(path.join(dataDir, 'cluster')).digest('hex').slice(0, 12));
}

/**
 * A whole cluster on one machine, for trying it and for tests: one PostgreSQL on loopback, M control
 * planes on consecutive ports sharing it, and N node agents, each with its own data directory and
 * btrfs image, registering with every control plane. Members run as child processes (`space
 * control-plane`, `space node`), each with a pid file.
 */
export class LocalCluster {
  readonly root: string;
  readonly controlPlaneUrls: string[] = [];
  private readonly members = new Map<string, ClusterMember>();
  private postgres: LocalPostgres | null = null;
  private databaseUrl = '';
  private s3: Awaited<ReturnType<typeof startLoopbackS3>> | null = null;

  constructor(private readonly options: LocalClusterOptions) {
    this.root = path.join(options.dataDir, 'cluster');
  }

  /**
   * PostgreSQL's data, kept across runs like the nodes' data: in the `postgres` user's home, since
   * the server cannot enter the data directory (root only). One per data directory.
   */
  get postgresDir(): string {
    return clusterPostgresDir(this.options.dataDir);
  }

  /** The cluster CA the control planes sign nodes' certificates with. */
  get clusterCaDir(): string {
    return path.join(this.root, 'cluster-ca');
  }

  /** The node agents' names (their ids): node-1 … node-N. */
  get nodeNames(): string[] {
    return Array.from({ length: this.options.nodes }, (_, i) => `node-${i + 1}`);
  }

  member(name: string): ClusterMember | undefined {
    return this.members.get(name);
  }

  async start(progress: (message: string) => void = () => undefined): Promise<void> {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    // Node APIs over HTTPS with certificates of the cluster's CA, which every control plane holds.
    await createClusterCa(this.clusterCaDir);
    this.postgres = await startLocalPostgres({ dir: this.postgresDir });
    this.databaseUrl = await this.postgres.url('space');
    progress(`PostgreSQL on ${this.databaseUrl}`);
    this.s3 = await startLoopbackS3({ directory: path.join(this.root, 'objects') });
    progress(`checkpoints shipped to ${this.objectStoreEnv().SPACE_OBJECT_STORE} on ${this.s3.endpoint}`);
    for (let i = 0; i < this.options.controlPlanes; i++) {
      this.controlPlaneUrls.push(await this.startControlPlane(i));
      progress(`control plane ${i + 1} on ${this.controlPlaneUrls[i]}`);
    }
    // The first node makes the gateway CA every node shares; the others start side by side.
    const [first, ...rest] = this.nodeNames;
    if (first) await this.startNode(first, progress);
    await Promise.all(rest.map((name) => this.startNode(name, progress)));
  }

  /** The names of the control planes: control-plane-1 … control-plane-M. */
  get controlPlaneNames(): string[] {
    return Array.from({ length: this.options.controlPlanes }, (_, i) => `control-plane-${i + 1}`);
  }

  /** Starts control plane `index` (from 0; again, after it stopped or was killed) on its port; resolves with its URL. */
  startControlPlane(index: number): Promise<string> {
    return this.startMember(
      this.controlPlaneNames[index]!,
      'control-plane',
      this.controlPlaneEnv(this.options.port + index),
      /control plane on (http:\/\/\S+),/,
    );
  }

  /** Starts node `name` (again, after it stopped or was killed) on its own data directory. */
  async startNode(name: string, progress: (message: string) => void = () => undefined): Promise<void> {
    await this.startMember(name, 'node', await this.nodeEnv(name), /node \S+ registered with the control plane/);
    progress(`${name} registered (data in ${path.join(this.root, name)})`);
  }

  /**
   * Stops every member (nodes first: they stop their sandboxes and unmount) and PostgreSQL. A node
   * that died (killed, crashed) is started once more first: its sandboxes and mount would outlive it.
   */
  async stop(): Promise<void> {
    const stopAll = async (names: string[]) => Promise.all(names.map((name) => this.stopMember(name)));
    if (this.controlPlaneUrls.length > 0) {
      const dead = this.nodeNames.filter((name) => !this.members.has(name) && existsSync(path.join(this.root, name, 'btrfs.img')));
      await Promise.all(dead.map((name) => this.startNode(name).catch(() => undefined)));
    }
    await stopAll(this.nodeNames.filter((n) => this.members.has(n)));
    await stopAll([...this.members.keys()]);
    await this.postgres?.stop();
    this.postgres = null;
    await this.s3?.stop();
    this.s3 = null;
    // Never under a mount: a node that did not stop cleanly keeps its btrfs image mounted.
    if (this.options.removeDataOnStop && !readFileSync('/proc/mounts', 'utf8').includes(`${this.root}/`)) {
      rmSync(this.options.dataDir, { recursive: true, force: true });
      rmSync(this.postgresDir, { recursive: true, force: true });
    }
  }

  /** SIGTERM and wait for the member to exit (its pid file goes with it). */
  async stopMember(name: string): Promise<number | null> {
    const member = this.members.get(name);
    if (!member) return null;
    const { code } = await signalAndWait(member.process, 'SIGTERM');
    this.members.delete(name);
    rmSync(member.pidFile, { force: true });
    return code;
  }

  private controlPlaneEnv(port: number): Record<string, string> {
    const dir = path.join(this.root, 'control-plane');
    return {
      SPACE_DATA_DIR: dir,
      SPACE_PORT: String(port),
      SPACE_DATABASE_URL: this.databaseUrl,
      SPACE_API_KEY: this.options.adminKey,
      // Every control plane opens node tokens and secret values with the same key.
      SPACE_SECRETS_KEY_FILE: path.join(dir, 'secrets.key'),
      SPACE_CLUSTER_CA_DIR: this.clusterCaDir,
      ...this.objectStoreEnv(),
    };
  }

  /** A node's settings: it joins with a join token the first time, then heartbeats with the credential it was issued (never the admin key). */
  private async nodeEnv(name: string): Promise<Record<string, string>> {
    const dataDir = path.join(this.root, name);
    const joined = existsSync(path.join(dataDir, 'node', 'credential'));
    return {
      SPACE_DATA_DIR: dataDir,
      SPACE_NODE_ID: name,
      SPACE_NODE_PORT: '0',
      SPACE_CONTROL_PLANE_URL: this.controlPlaneUrls.join(','),
      ...(joined ? {} : { SPACE_NODE_JOIN_TOKEN: await this.joinToken() }),
      SPACE_GATEWAY_CA_DIR: path.join(this.root, 'gateway-ca'),
      ...this.objectStoreEnv(),
    };
  }

  /** A new join token from the first control plane that answers, as `space node join-token` makes one. */
  private async joinToken(): Promise<string> {
    const errors: string[] = [];
    for (const url of this.controlPlaneUrls) {
      try {
        const res = await fetch(`${url}/v1/nodes/join-tokens`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.options.adminKey}`, 'content-type': 'application/json' },
          body: '{}',
        });
        const text = await res.text();
        if (res.status === 201) return (JSON.parse(text) as { token: string }).token;
        errors.push(`${url}: ${res.status} ${text.slice(0, 200)}`);
      } catch (err) {
        errors.push(`${url}: ${(err as Error).message}`);
      }
    }
    throw new Error(`no control plane made a join token: ${errors.join('; ')}`);
  }

  /** The loopback S3 server (s3rver, for this command and tests only), its objects in `<root>/objects`. */
  private objectStoreEnv(): Record<string, string> {
    if (!this.s3) return {};
    return {
      SPACE_OBJECT_STORE: `s3://${this.s3.bucket}/cluster`,
      SPACE_S3_ENDPOINT: this.s3.endpoint,
      SPACE_S3_FORCE_PATH_STYLE: '1',
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
    };
  }

  /** Starts `space <command>` as `name`, writes its pid file, and resolves with the first group of `ready` in its output. */
  private startMember(name: string, command: string, env: Record<string, string>, ready: RegExp): Promise<string> {
    // In a process group of its own: the terminal's Ctrl-C reaches `cluster up` alone, which stops
    // the members in order (nodes first), instead of every member and its children at once.
    const child = spawn(process.execPath, [cliMain, command], {
      env: { ...process.env, ...this.options.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const pidFile = path.join(this.root, `${name}.pid`);
    writeFileSync(pidFile, `${child.pid}\n`);
    this.members.set(name, { name, process: child, pidFile });
    let partial = '';
    let recent: string[] = [];
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start within ${readyWithin / 1000} s:\n${recent.join('\n')}`)), readyWithin);
      const take = (data: Buffer) => {
        const lines = (partial + data.toString()).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          this.options.output?.(name, line);
          recent = [...recent.slice(-49), line];
          const match = ready.exec(line);
          if (match) {
            clearTimeout(timer);
            resolve(match[1] ?? name);
          }
        }
      };
      child.stdout!.on('data', take);
      child.stderr!.on('data', take);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        rmSync(pidFile, { force: true });
        if (this.members.get(name)?.process === child) this.members.delete(name);
        this.options.output?.(name, `exited (${signal ?? `code ${code}`})`);
        reject(new Error(`${name} exited (${signal ?? `code ${code}`}) before it was ready:\n${recent.join('\n')}`));
      });
    });
  }
}
