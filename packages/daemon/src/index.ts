export { createDaemonRouter, type DaemonDeps } from './server.js';
export { ProcessTable } from './process-table.js';
export { FileService } from './file-service.js';
export { SandboxPaths } from './sandbox-paths.js';
