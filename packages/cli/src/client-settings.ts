import { setting, sharedSettings } from '@space/server-kit';

/** What the CLI's client commands read (the SDK reads the same `SPACE_API_URL` and `SPACE_API_KEY`). */
export const clientSettings = {
  apiUrl: setting.list('SPACE_API_URL', {
    default: ['http://127.0.0.1:7070'],
    check: /^https?:\/\/[^/]+/,
    expects: 'http(s) URLs, comma-separated',
    doc: 'the control planes a client calls: it moves to the next when one does not answer',
  }),
  apiKey: sharedSettings.apiKey,
  dataDir: sharedSettings.dataDir,
};
