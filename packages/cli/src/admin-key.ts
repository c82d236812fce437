import { existsSync } from 'node:fs';
import path from 'node:path';
import { generateKey } from '@space/control-plane';
import { persistentValue } from '@space/node';

/** The admin key: SPACE_API_KEY when set; otherwise generated once, stored 0600, and printed that once. */
export async function resolveAdminKey(dataDir: string, configured: string | undefined, print: (line: string) => void): Promise<string> {
  if (configured) return configured;
  const file = path.join(dataDir, 'api-key');
  const fresh = !existsSync(file);
  const key = await persistentValue(file, generateKey);
  if (fresh) print(`Generated the admin API key (shown once, stored in ${file}):\n\n    ${key}\n`);
  else print(`Admin API key: in ${file}`);
  return key;
}
