// What the API fuzzer and the request families it mixes in (E2B, Dockerfiles) share.

/** What the fuzzer aims at: a platform, a tenant's key, and things of that tenant to name in paths. */
export interface FuzzTarget {
  url: string;
  key: string;
  adminKey: string;
  sessionId: string;
  checkpointId: string;
  secretName: string;
  /** A volume of the tenant, and a snapshot of it. */
  volumeName: string;
  volumeSnapshotId: string;
  /** A background process of the session. */
  pid: number;
  /** A session token of the session: the E2B data plane's access token. */
  accessToken: string;
}

/** One request of the fuzzer's: what it is, and how to send it. */
export interface Attempt {
  description: string;
  run(): Promise<{ status: number; reply: string }>;
}
