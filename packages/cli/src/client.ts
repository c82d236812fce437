import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Space, isSpaceApiError } from '@space/sdk';
import { readSettings } from '@space/server-kit';
import { clientSettings } from './client-settings.js';

/** The SDK client for CLI commands: SPACE_API_URL, and SPACE_API_KEY or the local admin key file. */
export function cliClient(env: NodeJS.ProcessEnv): Space {
  const settings = readSettings(clientSettings, env);
  let apiKey = settings.apiKey;
  const keyFile = path.join(settings.dataDir, 'api-key');
  if (!apiKey && existsSync(keyFile)) apiKey = readFileSync(keyFile, 'utf8').trim();
  if (!apiKey) throw new Error(`no API key: set SPACE_API_KEY (or run on the SPACE host, where ${keyFile} holds the admin key)`);
  return new Space({ apiUrl: settings.apiUrl, apiKey });
}

/** Prints a value as JSON (`--json`) or as the given human lines. */
/** `NAME=VALUE` flags (`--env`, `--build-arg`) as a record; `flag` names the option in the error. */
export function parseNameValues(pairs: string[], flag: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new Error(`${flag} takes NAME=VALUE, got ${JSON.stringify(pair)}`);
    values[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return values;
}

export function output(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
}

/** Error line with a hint for the common causes. */
export function describeError(err: unknown): string {
  if (isSpaceApiError(err)) {
    const hints: Record<string, string> = {
      UNAUTHORIZED: 'check SPACE_API_KEY',
      SESSION_NOT_FOUND: 'list your sessions with "space ls"',
      UNKNOWN_TEMPLATE: 'list templates with "space template ls"',
      TEMPLATE_IN_USE: 'delete the sessions made from it first, or add --force (they keep their files)',
      SANDBOX_DIED: 'the session resumes on the next call: run the command again',
      SANDBOX_STOPPED: 'a restore or kill of the session stopped its sandbox during the call: run the command again',
      CHECKPOINT_NOT_FOUND: 'list checkpoints with "space checkpoints SESSION"',
      FULL_CHECKPOINT_REFUSED: 'your files are saved in the fs checkpoint named above',
      FULL_CHECKPOINT_FAILED: 'your files are saved in the fs checkpoint named above',
      SECRET_NOT_FOUND: 'list secrets with "space secrets ls"; create one with "space secrets set NAME --host HOST"',
      SESSION_BUSY: 'another operation on the session is still running: try again',
      TOO_MANY_REQUESTS: 'a tenant limit on calls at once or per second: try again shortly ("space limits" shows them)',
      QUOTA_EXCEEDED: '"space limits" shows what the tenant uses of each limit',
    };
    const hint = hints[err.code] ?? (err.status >= 500 && err.requestId ? `request ${err.requestId} in the platform's log` : undefined);
    return `${err.code}: ${err.message}${hint ? ` (${hint})` : ''}`;
  }
  return (err as Error)?.message ?? String(err);
}
