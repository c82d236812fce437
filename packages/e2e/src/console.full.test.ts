import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Browser, type Page, chromium } from 'playwright-core';
import { Space } from '@space/sdk';
import { Api } from './client.js';
import { type RunningPlatform, repoRoot } from './platform.js';
import { platformForSuite } from './suite-platform.js';

/** Where the test leaves its screenshots. */
const artifacts = path.join(repoRoot, 'test-artifacts/console');
/** The README's and docs/console.md's screenshots, taken again by every run so they show the console as it is. */
const docImages = path.join(repoRoot, 'docs/images');

/** A screenshot into the artifacts and, when `docImage` names one, over the docs' image of that name. */
async function shoot(page: Page, name: string, docImage?: string): Promise<void> {
  await page.screenshot({ path: path.join(artifacts, name) });
  if (docImage) copyFileSync(path.join(artifacts, name), path.join(docImages, docImage));
}

/** The web console in Debian's chromium, driven by playwright-core: every step through the real UI and API. */
describe('web console', () => {
  let platform: RunningPlatform;
  let admin: Api;
  let browser: Browser;
  const made: { api: Api; id: string }[] = [];

  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  after(async () => {
    for (const { api, id } of made) await api.call('DELETE', `/v1/sessions/${id}`);
    await browser?.close();
  });
  // Usage sampled every second: the usage page shows a session's within seconds.
  platformForSuite([], (p, a) => ((platform = p), (admin = a)), { env: { SPACE_USAGE_SAMPLE_SEC: '1' } });

  async function newTenant(name: string): Promise<{ api: Api; key: string }> {
    const { id } = (await admin.call('POST', '/v1/tenants', { name })).body;
    const { key } = (await admin.call('POST', '/v1/keys', { tenantId: id })).body;
    return { api: new Api(platform.url, key), key };
  }

  async function signedIn(key: string): Promise<Page> {
    const page = await (await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 860 } })).newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${platform.url}/console`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    return page;
  }

  test('sign in, create a session, type into its terminal, upload and download a file, checkpoint and fork; another tenant sees none of it', {
    timeout: 180_000,
  }, async () => {
    const { api, key } = await newTenant('console-user');
    const page = await signedIn(key);
    await page.getByLabel('Template').selectOption('tiny');
    await page.getByRole('button', { name: 'Create session' }).click();
    await page.waitForURL(/#\/sessions\/ses_[a-z0-9]+$/, { timeout: 60_000 });
    const sessionId = /ses_[a-z0-9]+$/.exec(page.url())![0];
    made.push({ api, id: sessionId });

    // The terminal: a shell over the PTY stream; what is typed runs, what it prints shows.
    await page.locator('[data-terminal-state="connected"]').waitFor({ timeout: 30_000 });
    await page.locator('.terminal-box').click();
    await page.keyboard.type('echo hi-from-the-$((6*7))-console > /tmp/proof; cat /tmp/proof\n');
    await page.locator('.xterm-rows', { hasText: 'hi-from-the-42-console' }).waitFor({ timeout: 20_000 });
    assert.equal((await api.exec(sessionId, 'cat /tmp/proof')).stdout, 'hi-from-the-42-console\n', 'the command really ran in the sandbox');
    await shoot(page, 'session-terminal.png', 'console-session.png');

    // Files: upload through the file input, see it listed, download it again.
    await page.getByRole('tab', { name: 'Files' }).click();
    await page.locator('#upload').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('written in the browser\n') });
    await page.locator('[data-file="notes.txt"]').waitFor();
    assert.equal((await api.exec(sessionId, 'cat /workspace/notes.txt')).stdout, 'written in the browser\n');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download notes.txt' }).click()]);
    assert.equal(readFileSync((await download.path())!, 'utf8'), 'written in the browser\n');
    await shoot(page, 'session-files.png');

    // History: a checkpoint, then two forks of it.
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByRole('button', { name: 'Checkpoint files' }).click();
    const checkpointRow = page.locator('[data-checkpoint]').first();
    await checkpointRow.waitFor({ timeout: 30_000 });
    const checkpointId = (await checkpointRow.getAttribute('data-checkpoint'))!;
    await page.getByRole('button', { name: `Fork 2 from ${checkpointId}` }).click();
    await page.locator('[data-fork]').nth(1).waitFor({ timeout: 60_000 });
    const forks = await page.locator('[data-fork]').evaluateAll((links) => links.map((l) => l.getAttribute('data-fork')!));
    for (const id of forks) made.push({ api, id });
    assert.equal(forks.length, 2);
    for (const id of forks) assert.equal((await api.call('GET', `/v1/sessions/${id}`)).body.parentCheckpointId, checkpointId);
    await shoot(page, 'session-history.png');

    // The lineage graph: the session and its two forks, drawn from the checkpoint.
    await page.getByRole('tab', { name: 'Lineage' }).click();
    await page.locator(`[data-lineage-session="${forks[1]}"]`).waitFor({ timeout: 20_000 });
    assert.equal(await page.locator('[data-lineage-session]').count(), 3);
    await shoot(page, 'session-lineage.png', 'console-lineage.png');

    // Kill the sandbox: the history records its death (events, no reload), then the resume a call makes.
    await page.getByRole('tab', { name: 'History' }).click();
    await page.getByRole('button', { name: 'Kill the sandbox' }).click();
    await page.locator('[data-sandbox]', { hasText: 'killed' }).waitFor({ timeout: 20_000 });
    await api.exec(sessionId, 'true');
    await page.locator('[data-sandbox]').nth(1).waitFor({ timeout: 20_000 });
    await page.locator(`[data-timeline-sandbox]`).nth(1).waitFor();
    await shoot(page, 'session-timeline.png');

    // Restore from the console: the sandbox is replaced, the history says why.
    await page.getByRole('button', { name: `Restore ${checkpointId}` }).click();
    await page.locator('[data-sandbox]', { hasText: 'restored' }).waitFor({ timeout: 30_000 });
    assert.equal((await api.exec(sessionId, 'cat /tmp/proof')).stdout, 'hi-from-the-42-console\n', "the checkpoint's files");

    // The sessions list shows all three; its keyboard order reaches each link.
    await page.goto(`${platform.url}/console#/sessions`);
    for (const id of [sessionId, ...forks]) await page.locator(`[data-session="${id}"]`).waitFor();
    await shoot(page, 'sessions.png', 'console-sessions.png');
    // Dark mode follows the system's setting: the same page in the dark palette.
    const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const light = await background();
    await page.emulateMedia({ colorScheme: 'dark' });
    const dark = await background();
    const brightness = (rgb: string) =>
      rgb
        .match(/\d+/g)!
        .slice(0, 3)
        .reduce((sum, c) => sum + Number(c), 0) / 3;
    assert.ok(brightness(light) > 200 && brightness(dark) < 60, `light ${light}, dark ${dark}`);
    await shoot(page, 'sessions-dark.png', 'console-sessions-dark.png');
    await page.emulateMedia({ colorScheme: 'light' });

    // Another tenant: none of it; a wrong key: refused at sign-in.
    const stranger = await signedIn((await newTenant('console-stranger')).key);
    await stranger.getByText('No sessions.').waitFor();
    const wrong = await (await browser.newContext()).newPage();
    await wrong.goto(`${platform.url}/console`);
    await wrong.getByLabel('API key').fill('sk_not_a_key');
    await wrong.getByRole('button', { name: 'Sign in' }).click();
    await wrong.getByRole('alert').waitFor();
    assert.match((await wrong.getByRole('alert').textContent()) ?? '', /invalid API key/);
  });

  test("the changes between two points of a session: picked on the timeline, a file's diff, a file as it was, put back with one click", {
    timeout: 120_000,
  }, async () => {
    const { api, key } = await newTenant('console-timeline');
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    made.push({ api, id: session.id });
    await api.exec(session.id, 'echo "mode: good" > config.yaml && echo keep > kept.txt');
    const good = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' })).body.id as string;
    await api.exec(session.id, 'echo "mode: broken" > config.yaml && echo new > new.txt');
    const broken = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' })).body.id as string;
    await api.exec(session.id, 'rm kept.txt');

    const page = await signedIn(key);
    await page.goto(`${platform.url}/console#/sessions/${session.id}`);
    await page.getByRole('tab', { name: 'Changes' }).click();
    // Two dots on the timeline: the first picks where from, the second where to.
    await page.getByRole('button', { name: `Pick checkpoint ${good}` }).click();
    await page.getByRole('button', { name: `Pick checkpoint ${broken}` }).click();
    assert.deepEqual([await page.locator('#diff-from').inputValue(), await page.locator('#diff-to').inputValue()], [good, broken]);
    await page.getByRole('button', { name: 'Compare' }).click();
    await page.locator('[data-change="/workspace/new.txt"]').waitFor({ timeout: 20_000 });
    const changed = async () =>
      (await page.locator('[data-change]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-change')!))).filter((p) => p.startsWith('/workspace/'));
    assert.deepEqual(await changed(), ['/workspace/config.yaml', '/workspace/new.txt']);
    await page.getByRole('button', { name: 'Diff of /workspace/config.yaml' }).click();
    await page.locator('[data-shown] pre', { hasText: '+mode: broken' }).waitFor();
    assert.match((await page.locator('[data-shown] pre').textContent()) ?? '', /^-mode: good$/m);
    await page.getByRole('button', { name: 'Open /workspace/config.yaml as before' }).click();
    await page.locator('[data-shown] figcaption', { hasText: `/workspace/config.yaml in ${good}` }).waitFor();
    assert.equal(await page.locator('[data-shown] pre').textContent(), 'mode: good\n');
    await shoot(page, 'session-changes.png', 'console-changes.png');

    // Against its files now: the removal not yet checkpointed shows; one click puts the file back.
    await page.locator('#diff-to').selectOption('live');
    await page.getByRole('button', { name: 'Compare' }).click();
    await page.locator('[data-change="/workspace/kept.txt"]').waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: `Restore /workspace/config.yaml from ${good}` }).click();
    await page.locator('[data-restored]').waitFor({ timeout: 30_000 });
    assert.equal((await api.exec(session.id, 'cat config.yaml')).stdout, 'mode: good\n', 'put back in the running session');
    assert.match((await page.locator('[data-restored]').textContent()) ?? '', /to undo, restore checkpoint ckp_/);
  });

  test('what a session holds is shown as text, never as markup: file names, process commands; a process can be attached to', { timeout: 120_000 }, async () => {
    const { api, key } = await newTenant('console-escaping');
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    made.push({ api, id: session.id });
    const hostile = '<img src=x onerror=window.pwned=1>.txt';
    await api.call('PUT', `/v1/sessions/${session.id}/files?path=${encodeURIComponent(`/workspace/${hostile}`)}`, undefined, {
      raw: '<script>window.pwned=2</script>\u001b[31mred\n',
    });
    await api.exec(session.id, ['sh', '-c', 'while true; do echo "tick <b>bold</b>"; sleep 1; done # <i>x</i>'], { background: true });
    const page = await signedIn(key);
    await page.goto(`${platform.url}/console#/sessions/${session.id}`);
    await page.getByRole('tab', { name: 'Files' }).click();
    await page.locator(`[data-file="${hostile}"]`).waitFor();
    await page.getByRole('button', { name: hostile, exact: true }).click();
    await page.locator('pre.view', { hasText: '<script>window.pwned=2</script>' }).waitFor();
    assert.equal(await page.locator('section[aria-label="Files"] img, section[aria-label="Files"] script').count(), 0, 'rendered as text');
    await page.getByRole('tab', { name: 'Processes' }).click();
    await page.getByRole('cell', { name: /<i>x<\/i>/ }).waitFor();
    assert.equal(await page.locator('section[aria-label="Processes"] i').count(), 0);
    await page
      .getByRole('button', { name: /^Attach to process/ })
      .first()
      .click();
    await page.locator('[data-attached] .xterm-rows', { hasText: 'tick <b>bold</b>' }).waitFor({ timeout: 20_000 });
    assert.equal(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned), undefined, 'no script ran');
    await shoot(page, 'session-processes.png');
  });

  test("secrets (values write-only), a session's egress policy, templates with their pools, metrics charts and usage", { timeout: 120_000 }, async () => {
    const { api, key } = await newTenant('console-settings');
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    made.push({ api, id: session.id });
    const page = await signedIn(key);

    await page.getByRole('link', { name: 'Secrets' }).click();
    await page.getByLabel('Name').fill('GITHUB_TOKEN');
    await page.getByLabel('Value').fill('ghp_never_shown');
    await page.getByLabel('Hosts').fill('api.github.com');
    await page.getByRole('button', { name: 'Set' }).click();
    await page.locator('[data-secret="GITHUB_TOKEN"]').waitFor();
    assert.doesNotMatch((await page.content()) ?? '', /ghp_never_shown/, 'the value is write-only');
    assert.deepEqual((await api.call('GET', '/v1/secrets')).body.secrets[0].hosts, ['api.github.com']);
    await shoot(page, 'secrets.png');

    await page.goto(`${platform.url}/console#/sessions/${session.id}`);
    await page.getByRole('tab', { name: 'Egress' }).click();
    await page.getByLabel('Outbound traffic').selectOption('allow-list');
    await page.getByLabel(/^Domains/).fill('api.github.com\n*.pypi.org');
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByRole('status').waitFor();
    assert.deepEqual((await api.call('GET', `/v1/sessions/${session.id}`)).body.egress, {
      mode: 'allow-list',
      domains: ['api.github.com', '*.pypi.org'],
      cidrs: [],
    });
    await shoot(page, 'session-egress.png');

    await page.getByRole('link', { name: 'Templates' }).click();
    await page.locator('[data-template="tiny"]').waitFor();
    assert.match((await page.locator('[data-template="tiny"]').textContent()) ?? '', /built-in/);
    await shoot(page, 'templates.png');

    await page.getByRole('link', { name: 'Metrics' }).click();
    await page.getByRole('img', { name: 'Sandbox starts' }).waitFor();
    await shoot(page, 'metrics.png');

    const metered = async () => (await api.call('GET', `/v1/usage?groupBy=session&sessionId=${session.id}`)).body.rows.length > 0;
    for (let i = 0; i < 60 && !(await metered()); i++) await new Promise((resolve) => setTimeout(resolve, 1000));
    await page.getByRole('link', { name: 'Usage' }).click();
    await page.getByRole('heading', { name: 'Usage' }).waitFor();
    await page.getByLabel('By').selectOption('session');
    await page.getByRole('cell', { name: session.id }).waitFor();
    await page.getByRole('rowheader', { name: 'Total' }).waitFor();
    await shoot(page, 'usage.png', 'console-usage.png');
  });

  test("the event stream tells a tenant of its sessions and checkpoints as they change, and nothing of another tenant's", { timeout: 120_000 }, async () => {
    const { api, key } = await newTenant('events-watcher');
    const other = await newTenant('events-other');
    const abort = new AbortController();
    const events: { type: string; sessionId: string }[] = [];
    const res = await fetch(`${platform.url}/v1/events`, { headers: { authorization: `Bearer ${key}` }, signal: abort.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const data = /^data: (.*)$/m.exec(buffer.slice(0, end))?.[1];
          buffer = buffer.slice(end + 2);
          if (data) events.push(JSON.parse(data));
        }
      }
    })().catch(() => undefined);
    // The same through the SDK.
    const viaSdk: string[] = [];
    const sdkReading = (async () => {
      for await (const event of new Space({ apiUrl: platform.url, apiKey: key }).events({ signal: abort.signal }))
        viaSdk.push(`${event.type} ${event.sessionId}`);
    })();
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 100));
      assert.ok(check(), JSON.stringify(events));
    };
    await new Promise((r) => setTimeout(r, 1200));
    const session = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    const strangers = await other.api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
    await until(() => events.some((e) => e.type === 'session.created' && e.sessionId === session.id));
    const checkpoint = (await api.call('POST', `/v1/sessions/${session.id}/checkpoints`, { kind: 'fs' })).body;
    await until(() => events.some((e: any) => e.type === 'checkpoint.created' && e.checkpointId === checkpoint.id));
    await api.call('POST', `/v1/sessions/${session.id}/sandbox/kill`);
    await until(() => events.some((e: any) => e.type === 'session.status' && e.sessionId === session.id && e.status === 'stopped'));
    await api.call('DELETE', `/v1/sessions/${session.id}`);
    await until(() => events.some((e) => e.type === 'session.deleted' && e.sessionId === session.id));
    assert.ok(
      events.every((e) => e.sessionId !== strangers.id),
      "another tenant's session is not told",
    );
    await other.api.call('DELETE', `/v1/sessions/${strangers.id}`);
    assert.ok(viaSdk.includes(`session.created ${session.id}`) && viaSdk.includes(`session.deleted ${session.id}`), viaSdk.join('\n'));
    abort.abort();
    await reading;
    await sdkReading;
  });

  test("a tenant's preview page opened in a tab signed into the console gets neither its key nor another tenant's previews (the probe, in the browser)", {
    timeout: 180_000,
  }, async () => {
    const a = await newTenant('console-victim');
    const b = await newTenant('preview-attacker');
    const server = async (api: Api, files: Record<string, string>): Promise<string> => {
      const { id } = await api.createSession({ template: 'base', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0, idleTimeoutSec: 0 });
      made.push({ api, id });
      for (const [name, content] of Object.entries(files))
        await api.call('PUT', `/v1/sessions/${id}/files?path=/workspace/site/${name}`, undefined, { raw: content });
      await api.exec(id, ['python3', '-m', 'http.server', '8000', '--directory', '/workspace/site'], { background: true });
      return id;
    };
    // A's app holds something worth taking, behind a preview token; B's page tries everything a page can.
    const victim = await server(a.api, { 'secret.txt': 'A-PREVIEW-SECRET' });
    const attack = `<script>
      (async () => {
        const out = {};
        const tryRead = (f) => { try { return String(f()); } catch (e) { return 'blocked'; } };
        out.session = tryRead(() => JSON.stringify(sessionStorage));
        out.local = tryRead(() => JSON.stringify(localStorage));
        out.cookie = tryRead(() => document.cookie);
        const grab = (url, init) => fetch(url, init).then(async (r) => r.status + ' ' + (await r.text()).slice(0, 200), () => 'failed');
        out.api = await grab('/v1/sessions', { credentials: 'include', headers: { 'x-space-console': '1' } });
        out.apiPlain = await grab('/v1/sessions', { credentials: 'include' });
        out.preview = await grab(new URLSearchParams(location.search).get('victim'), { credentials: 'include' });
        out.socket = await new Promise((resolve) => {
          const ws = new WebSocket('ws://' + location.host + '/v1/sessions/' + new URLSearchParams(location.search).get('session') + '/exec/stream', ['space']);
          ws.onopen = () => resolve('open');
          ws.onerror = () => resolve('refused');
        });
        document.title = 'done ' + JSON.stringify(out);
      })();
    </script>`;
    const attacker = await server(b.api, { 'index.html': attack });
    await b.api.call('PUT', `/v1/sessions/${attacker}/public-ports/8000`);

    const page = await signedIn(a.key);
    const { url: tokenUrl } = (await a.api.call('POST', `/v1/sessions/${victim}/preview-tokens/8000`, { ttlSec: 600 })).body;
    await page.goto(tokenUrl);
    const secretUrl = `${platform.url}/v1/sessions/${victim}/ports/8000/secret.txt`;
    await page.goto(secretUrl);
    assert.match((await page.textContent('body')) ?? '', /A-PREVIEW-SECRET/, "A's preview works in A's tab (the token's cookie)");

    await page.goto(`${platform.url}/v1/sessions/${attacker}/ports/8000/index.html?victim=${encodeURIComponent(secretUrl)}&session=${victim}`);
    await page.waitForFunction(() => document.title.startsWith('done '), undefined, { timeout: 30_000 });
    const stolen = JSON.parse((await page.title()).slice('done '.length)) as Record<string, string>;
    const everything = JSON.stringify(stolen);
    assert.ok(!everything.includes(a.key), `the console's key reached the preview page: ${everything}`);
    assert.ok(!everything.includes('A-PREVIEW-SECRET'), `the page read A's preview: ${everything}`);
    assert.deepEqual([stolen.session, stolen.local], ['blocked', 'blocked'], 'the page has an opaque origin: no storage of the console');
    assert.ok(!stolen.api.startsWith('200') && !stolen.apiPlain.startsWith('200'), `the page called the API as A: ${everything}`);
    assert.equal(stolen.socket, 'refused');

    // The console itself still works in that tab, and its page cannot read its own key either.
    await page.goto(`${platform.url}/console`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    assert.ok(!(await page.evaluate(() => document.cookie + JSON.stringify(sessionStorage) + JSON.stringify(localStorage))).includes(a.key));
    // A call with the cookie but without the console's header (what another page could send) is refused.
    const cookies = await page.context().cookies();
    const cookie = cookies.find((c) => c.name === 'space_console')!;
    assert.ok(cookie.httpOnly && cookie.sameSite === 'Strict', JSON.stringify(cookie));
    assert.equal((await fetch(`${platform.url}/v1/sessions`, { headers: { cookie: `space_console=${cookie.value}` } })).status, 401);
    assert.equal((await fetch(`${platform.url}/v1/sessions`, { headers: { cookie: `space_console=${cookie.value}`, 'x-space-console': '1' } })).status, 200);
    // Signing out ends it.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    assert.equal(
      (await page.context().cookies()).find((c) => c.name === 'space_console'),
      undefined,
    );
  });

  test('the console is served as static files with headers that keep it to itself; the metrics history is there for its charts', async () => {
    const history = (await (await fetch(`${platform.url}/v1/metrics/history`)).json()) as { samples: { at: string; values: Record<string, number> }[] };
    assert.ok(history.samples.length >= 1 && 'space_sandbox_starts_total' in history.samples[0]!.values, JSON.stringify(history).slice(0, 300));
    const page = await fetch(`${platform.url}/console`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
    assert.match(await page.text(), /<script type="module" src="\/console\/app.js">/);
    assert.equal((await fetch(`${platform.url}/console/app.js`)).status, 200);
    assert.equal((await fetch(`${platform.url}/console/../v1/sessions`)).status, 401, 'a path out of the console is the API (and needs a key)');
    assert.equal((await fetch(`${platform.url}/console/nothing.js`)).status, 404);
    assert.equal((await fetch(`${platform.url}/console`, { method: 'POST' })).status, 405);
  });
});
