import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Settings of `space up` and `space control-plane`, each from its environment variable (see docs/configuration.md). */
export interface PlatformConfig {
  /** SPACE_HOST, default 127.0.0.1 */
  host: string;
  /** SPACE_PORT, default 7070 */
  port: number;
  /** SPACE_DATA_DIR, default /var/lib/space */
  dataDir: string;
  /** SPACE_API_KEY: the admin key; when unset one is generated into <data>/api-key */
  apiKey: string | undefined;
  /** SPACE_TEMPLATES: templates built before serving, default "base,tiny" */
  templates: string[];
}

export function platformConfig(env: NodeJS.ProcessEnv): PlatformConfig {
  const port = Number(env.SPACE_PORT ?? 7070);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`SPACE_PORT must be a port number, got ${JSON.stringify(env.SPACE_PORT)}`);
  return {
    host: env.SPACE_HOST ?? '127.0.0.1',
    port,
    dataDir: path.resolve(env.SPACE_DATA_DIR ?? '/var/lib/space'),
    apiKey: env.SPACE_API_KEY || undefined,
    templates: (env.SPACE_TEMPLATES ?? 'base,tiny').split(',').map((t) => t.trim()).filter(Boolean),
  };
}

/** The bundled daemon, built by `npm run build` next to the daemon package. */
export function daemonBundleDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.resolve(here, '../../daemon/dist-sandbox');
}
