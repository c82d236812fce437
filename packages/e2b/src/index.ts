export { createE2bApi, e2bPrefix, type E2bApi, type E2bApiOptions } from './e2b-api.js';
export { Filesystem } from './gen/filesystem_pb.js';
export { Process } from './gen/process_pb.js';
export { egressFromE2b } from './control-api.js';
