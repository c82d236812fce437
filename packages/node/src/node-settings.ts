import { NodeIdSchema } from '@space/protocol';
import { setting } from '@space/server-kit';

const templateName = /^[a-z0-9][a-z0-9_.-]*$/;

/** Every setting of the node agent (`space node`, and the node half of `space up`); docs/configuration.md is generated from it. */
export const nodeSettings = {
  nodeHost: setting.text('SPACE_NODE_HOST', { default: '127.0.0.1', expects: 'an address', doc: 'the address the node API listens on' }),
  nodePort: setting.integer('SPACE_NODE_PORT', {
    default: 7071,
    min: 0,
    max: 65535,
    shownDefault: '`7071` (`space up`: a free port)',
    doc: 'the port of the node API; 0 takes a free one',
  }),
  nodeId: setting.text('SPACE_NODE_ID', {
    default: undefined,
    check: NodeIdSchema,
    expects: '1-64 letters, digits, `_`, `.` or `-`',
    shownDefault: 'generated into `<data>/node/node-id`',
    doc: "the node's id in a cluster (an operator names its nodes)",
  }),
  memoryMb: setting.integer('SPACE_NODE_MEMORY_MB', { default: 0, min: 0, shownDefault: "the host's", doc: 'the memory this node offers to placement, MB' }),
  cpus: setting.integer('SPACE_NODE_CPUS', { default: 0, min: 0, shownDefault: "the host's", doc: 'the CPUs this node offers to placement' }),
  templates: setting.list('SPACE_TEMPLATES', {
    default: ['base', 'tiny'],
    check: templateName,
    expects: 'template names, comma-separated',
    doc: 'built-in templates built (first start) and pooled before the node serves',
  }),
  debianMirror: setting.text('SPACE_DEBIAN_MIRROR', {
    default: undefined,
    check: /^https?:\/\/\S+$/,
    expects: 'an http(s) URL',
    shownDefault: "the mirror of apt's own sources",
    doc: 'where the `base` template is bootstrapped from',
  }),
  volumeSizeGb: setting.integer('SPACE_VOLUME_SIZE_GB', {
    default: 40,
    min: 1,
    doc: 'size of the sparse btrfs image created on first start (an upper bound, not an allocation)',
  }),
  hostDiskReserveMb: setting.integer('SPACE_HOST_DISK_RESERVE_MB', {
    default: 1024,
    min: 0,
    doc: 'below this much free on the filesystem holding the btrfs image, the node refuses new sessions and full checkpoints (a full host disk turns btrfs read-only); 0: never',
  }),
  volumeDirtyMb: setting.integer('SPACE_VOLUME_DIRTY_MB', {
    default: 16,
    min: 0,
    doc: "dirty data of the node's btrfs filesystem at most; 0 leaves the kernel's defaults",
  }),
  volumeCommitSec: setting.integer('SPACE_VOLUME_COMMIT_SEC', { default: 1, min: 1, doc: 'how often btrfs commits its transaction, seconds' }),
  checkpointStagingMb: setting.integer('SPACE_CHECKPOINT_STAGING_MB', {
    default: 2048,
    min: 0,
    doc: "host memory full checkpoints' images may take at once while their sandboxes are paused; 0 writes them to the volume",
  }),
  runscPlatform: setting.choice('SPACE_RUNSC_PLATFORM', ['ptrace', 'systrap'], {
    default: 'ptrace',
    doc: "gVisor's platform: systrap makes each system call cheaper (files written 1.6x faster in a VM) but starts processes slower (1.4x); see benchmarks.md",
  }),
  checkpointCompression: setting.choice('SPACE_CHECKPOINT_COMPRESSION', ['none', 'flate-best-speed'], {
    default: 'none',
    doc: 'compression of memory images (slower pauses, smaller images)',
  }),
  poolSize: setting.integer('SPACE_POOL_SIZE', { default: 2, min: 0, doc: 'ready sandboxes kept per template at least; 0 turns pooling off' }),
  poolTemplates: setting.list('SPACE_POOL_TEMPLATES', {
    default: null,
    check: templateName,
    expects: 'template names, comma-separated',
    shownDefault: 'every template prepared at start',
    doc: "templates with a pool; a tenant's template gets one from its demand",
  }),
  poolMaxMemoryMb: setting.integer('SPACE_POOL_MAX_MEMORY_MB', {
    // 128 sandboxes at 24 MB: a repeated burst of 100 is served from the pool (2048 held 85; docs/benchmarks.md).
    default: 3072,
    min: 0,
    doc: 'memory all pooled sandboxes may take together, within which the pool grows with demand; 0: fixed size',
  }),
  poolSandboxMemoryMb: setting.integer('SPACE_POOL_SANDBOX_MEMORY_MB', {
    default: 24,
    min: 0,
    doc: "what one idle pooled sandbox counts for in that budget at least, MB (bench/footprint.mjs measures it); a template whose ready sandboxes take more (a code interpreter's warm kernel) counts what they were measured to take",
  }),
  poolDemandMemorySec: setting.integer('SPACE_POOL_DEMAND_MEMORY_SEC', {
    default: 600,
    min: 0,
    doc: 'how long the pool remembers a burst of creates (the most within a minute), fading out: a repeat within it finds that many ready, within the budget',
  }),
  poolRefillDelayMs: setting.integer('SPACE_POOL_REFILL_DELAY_MS', {
    default: 500,
    min: 0,
    doc: 'pause between two refill boots, so refilling leaves CPU to running sandboxes',
  }),
  templateImages: setting.flag('SPACE_TEMPLATE_IMAGES', {
    default: false,
    doc: '`1`: snapshot preloading, a memory image per pooled template for creates the pool cannot serve',
  }),
  gatewayCaDir: setting.text('SPACE_GATEWAY_CA_DIR', {
    default: undefined,
    expects: 'a directory',
    shownDefault: '`<data>/gateway-ca`',
    doc: "the cluster's gateway CA; created on first start; copy it to every node",
  }),
  egressIpv6: setting.flag('SPACE_EGRESS_IPV6', {
    default: false,
    doc: '`1`: sandboxes (and image pulls) may reach IPv6 addresses; off, an IPv6 literal or a name with only AAAA records is refused',
  }),
  gatewayDnsMaxTtl: setting.integer('SPACE_GATEWAY_DNS_MAX_TTL', {
    default: 300,
    min: 0,
    doc: 'seconds the egress gateway keeps a DNS answer at most (shorter TTLs are respected); 0: no cache',
  }),
  s3Endpoint: setting.text('SPACE_S3_ENDPOINT', {
    default: undefined,
    check: /^https?:\/\/\S+$/,
    expects: 'an http(s) URL',
    shownDefault: "AWS's",
    doc: 'the endpoint of an S3-compatible object store (MinIO, Ceph RGW, R2, ...)',
  }),
  s3Region: setting.text('SPACE_S3_REGION', { default: 'us-east-1', expects: 'a region', doc: "the object store's region" }),
  s3ForcePathStyle: setting.flag('SPACE_S3_FORCE_PATH_STYLE', { default: false, doc: '`1`: the bucket in the path, as most S3-compatible stores want' }),
  s3CaFile: setting.text('SPACE_S3_CA_FILE', {
    default: undefined,
    expects: 'a PEM file',
    shownDefault: "the system's CAs",
    doc: "a CA that an `https://` `SPACE_S3_ENDPOINT`'s certificate may be signed by, besides the system's (a private CA); the certificate is verified always",
  }),
  controlPlaneUrls: setting.list('SPACE_CONTROL_PLANE_URL', {
    default: [],
    check: /^https?:\/\/[^/]+/,
    expects: 'http(s) URLs, comma-separated',
    doc: 'control planes this node registers with, as a cluster member (with `SPACE_NODE_JOIN_TOKEN` the first time)',
  }),
  joinToken: setting.text('SPACE_NODE_JOIN_TOKEN', {
    default: undefined,
    expects: 'a join token (`space node join-token`)',
    doc: 'a one-time token a cluster member trades for its own credential at its first start (kept in `<data>/node/credential`; its heartbeats carry it, never the admin key)',
  }),
  undrainAtStart: setting.flag('SPACE_NODE_UNDRAIN_AT_START', {
    default: false,
    doc: '`1`: a cluster member takes sessions again once it has registered, had it been drained (a Kubernetes node pod: its preStop hook drains it, `space node drain --self`); `0`: a drain holds until `space node undrain`',
  }),
  usageSampleSec: setting.integer('SPACE_USAGE_SAMPLE_SEC', {
    default: 15,
    min: 1,
    max: 3600,
    doc: "how often the node reads its sandboxes' CPU, memory and volumes for usage metering and closes a batch for the control planes (what a node agent that dies loses at most of memory, time and egress)",
  }),
  heartbeatMs: setting.integer('SPACE_HEARTBEAT_MS', {
    default: 2000,
    min: 100,
    doc: 'how often a cluster member heartbeats; control planes mark it lost after `SPACE_NODE_LOST_AFTER_SEC` without one',
  }),
  certRenewDays: setting.positive('SPACE_NODE_CERT_RENEW_DAYS', {
    default: 30,
    doc: "a cluster member renews its node API's certificate (of the cluster CA, valid 397 days) once fewer days than this are left, without a restart",
  }),
  advertiseUrl: setting.text('SPACE_NODE_ADVERTISE_URL', {
    default: undefined,
    check: /^https?:\/\/[^/]+/,
    expects: 'an http(s) URL',
    shownDefault: '`http://SPACE_NODE_HOST:port`',
    doc: 'how control planes reach this node',
  }),
  gatewayTestHosts: setting.text('SPACE_GATEWAY_TEST_HOSTS', {
    default: undefined,
    testOnly: true,
    check: /^\s*([a-z0-9.-]+=\d+\.\d+\.\d+\.\d+:\d+\s*(,\s*|$))+$/i,
    expects: 'name=ip:port entries, comma-separated',
    doc: 'requests for `name` go to that address (loopback allowed)',
  }),
  gatewayTestCaFile: setting.text('SPACE_GATEWAY_TEST_CA_FILE', {
    default: undefined,
    testOnly: true,
    expects: 'a file',
    doc: 'a CA the gateway trusts for those test hosts',
  }),
};
