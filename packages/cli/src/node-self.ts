import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { readNodeSettings } from '@space/node';
import { Space } from '@space/sdk';

/**
 * This host's node as its own client: its id and a client of its control planes carrying the
 * credential it was issued when it joined, for `space node drain --self` (a node pod's preStop
 * hook) and `undrain --self`, so a sandbox host never needs the admin key.
 */
export function nodeSelf(env: NodeJS.ProcessEnv): { nodeId: string; client: Space } {
  const settings = readNodeSettings(env);
  const dir = path.join(settings.dataDir, 'node');
  const read = (name: string, why: string): string => {
    const file = path.join(dir, name);
    if (!existsSync(file)) throw new Error(`--self: no ${file} (${why}): run it on the node's host, with its SPACE_DATA_DIR`);
    return readFileSync(file, 'utf8').trim();
  };
  if (settings.controlPlaneUrls.length === 0) throw new Error('--self: set SPACE_CONTROL_PLANE_URL, the control planes this node joined');
  const nodeId = settings.nodeId ?? read('node-id', 'the node id, or set SPACE_NODE_ID');
  const credential = read('credential', 'the credential the node was issued when it joined with a join token');
  return { nodeId, client: new Space({ apiUrl: settings.controlPlaneUrls, apiKey: credential }) };
}
