export { NodeAgent } from './node-agent.js';
export { ClusterHeartbeat } from './cluster-heartbeat.js';
export { resolveNodeConfig, persistentValue, type NodeConfig } from './node-config.js';
export { consoleLogger, type Logger } from './logger.js';
export { builtinRecipes } from './templates/recipes.js';
export { IpLeases } from './network/ip-leases.js';
export { SandboxNetwork } from './network/sandbox-network.js';
export { findAptMirror } from './templates/apt-mirror.js';
export { startLoopbackS3 } from './storage/loopback-s3.js';
