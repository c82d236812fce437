import type { Server } from 'node:http';
import { closeServer, listen } from '@space/server-kit';
import { createPublicApi } from './api/public-api.js';
import { Authenticator } from './auth.js';
import { NodeClient } from './node-client.js';
import { SessionService } from './session-service.js';
import { CheckpointService } from './checkpoint-service.js';
import type { Store } from './store/store.js';

export interface ControlPlaneOptions {
  host: string;
  port: number;
  adminKey: string;
  store: Store;
  node: { id: string; url: string; token: string };
}

/** The control plane's composition root. It keeps nothing in memory that matters: the store does. */
export class ControlPlane {
  readonly sessions: SessionService;
  private readonly node: NodeClient;
  private server: Server | null = null;
  port = 0;

  constructor(private readonly options: ControlPlaneOptions) {
    this.node = new NodeClient(options.node.id, options.node.url, options.node.token);
    this.sessions = new SessionService(options.store, this.node);
  }

  async start(): Promise<void> {
    const auth = new Authenticator(this.options.store);
    auth.installAdminKey(this.options.adminKey);
    const checkpoints = new CheckpointService(this.options.store, this.node, this.sessions);
    const api = createPublicApi({ auth, sessions: this.sessions, checkpoints, store: this.options.store });
    const { server, port } = await listen(api, this.options.host, this.options.port);
    this.server = server;
    this.port = port;
  }

  async stop(): Promise<void> {
    if (this.server) await closeServer(this.server);
    this.server = null;
    this.node.close();
  }
}
