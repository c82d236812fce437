export { createE2bApi, e2bPrefix, type E2bApiOptions } from './e2b-api.js';
export { egressFromE2b } from './control-api.js';
