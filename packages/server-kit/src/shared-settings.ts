import { setting } from './settings.js';

/** Settings both processes read, with the same meaning in each (`space up` runs both). */
export const sharedSettings = {
  dataDir: setting.text('SPACE_DATA_DIR', {
    default: '/var/lib/space',
    expects: 'a directory',
    doc: "where the process keeps its state: the store (SQLite), keys, the node's btrfs image and templates (see operations.md)",
  }),
  apiKey: setting.text('SPACE_API_KEY', {
    default: undefined,
    shownDefault: 'generated into `<data>/api-key`',
    expects: 'a key',
    doc: 'the admin key: the control plane accepts it, the CLI calls with it (a cluster node heartbeats with it only when it has no credential of its own, with a warning)',
  }),
  nodeToken: setting.text('SPACE_NODE_TOKEN', {
    default: undefined,
    shownDefault: 'generated into `<data>/node/token`',
    expects: 'a token',
    doc: 'the token of the node API: the node accepts it, a control plane with `SPACE_NODE_URL` presents it',
  }),
  objectStore: setting.text('SPACE_OBJECT_STORE', {
    default: undefined,
    check: /^(file:\/\/\/.+|s3:\/\/[^/]+(\/.*)?)$/,
    expects: 'file:///dir or s3://bucket/prefix',
    doc: "where nodes ship checkpoints so that any node can resume a session (unset: they stay on their node); the nodes' setting, and the control planes' so they ship and move",
  }),
  nodeFenceAfterSec: setting.positive('SPACE_NODE_FENCE_AFTER_SEC', {
    default: 6,
    doc: "a cluster node that no control plane has acknowledged for this long pauses its sandboxes and refuses their egress until one does, seconds; below the control planes' `SPACE_NODE_LOST_AFTER_SEC` (checked at start), so a cut-off copy is frozen before its session moves",
  }),
  otlpEndpoint: setting.text('OTEL_EXPORTER_OTLP_ENDPOINT', {
    default: undefined,
    check: /^https?:\/\/\S+$/,
    expects: 'an http(s) URL',
    shownDefault: 'unset: no traces',
    doc: 'an OpenTelemetry collector\'s OTLP/HTTP base URL: every API call\'s trace (control plane, node agent, in-sandbox agent) is posted to `<url>/v1/traces` as JSON (docs/operations.md, "Traces"); unset, nothing is traced',
  }),
  otlpTracesEndpoint: setting.text('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', {
    default: undefined,
    check: /^https?:\/\/\S+$/,
    expects: 'an http(s) URL',
    shownDefault: 'unset',
    doc: 'the full URL traces are posted to, instead of `OTEL_EXPORTER_OTLP_ENDPOINT`/v1/traces',
  }),
  sessionDiskGb: setting.positive('SPACE_SESSION_DISK_GB', {
    default: 10,
    doc: "disk of a session that names none (`resources.diskGb`): a btrfs simple quota counting what the session wrote; the control planes' setting, and the nodes', whose warm pools give their volumes that limit ahead (a claim then need not)",
  }),
  quiet: setting.flag('SPACE_QUIET', { default: false, doc: '`1`: a process logs only warnings and errors' }),
};
