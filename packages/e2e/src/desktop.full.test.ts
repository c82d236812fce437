import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { tmpdir } from 'node:os';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Sandbox as DesktopSandbox } from '@e2b/desktop';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type Session, Space, isSpaceApiError } from '@space/sdk';
import type { Api } from './client.js';
import { type Browser, chromium } from 'playwright-core';
import { decodePng, findColor } from './harness/png.js';
import { cliMain, type RunningPlatform } from './platform.js';
import { platformForSuite } from './suite-platform.js';

const execFileAsync = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** The test's own browser (Debian's chromium, driven by playwright-core), for pages people open. */
const testBrowser = () => chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });

/** noVNC's page at `url` connects and its canvas shows `color` (frames arrive, scaled to the window). */
async function liveViewShows(browser: Browser, url: string, color: [number, number, number], what: string): Promise<void> {
  const page = await browser.newPage({ viewport: { width: 1100, height: 860 } });
  const connected = page.locator('#noVNC_status', { hasText: 'Connected' });
  await page.goto(url);
  // noVNC does not try again after a first connection that failed (seen once in a full run on a busy
  // machine, its server up): a viewer reloads the page once, as a person would; a stream that never
  // works still fails, saying what noVNC said.
  if (
    !(await connected.waitFor({ state: 'attached', timeout: 30_000 }).then(
      () => true,
      () => false,
    ))
  ) {
    const said = await page.locator('#noVNC_status').textContent();
    await page.reload();
    await connected
      .waitFor({ state: 'attached', timeout: 30_000 })
      .catch((err: Error) => assert.fail(`${what}: not connected (first: "${said}"): ${err.message}`));
  }
  const deadline = Date.now() + 30_000;
  let seen = 0;
  while (seen < 10_000 && Date.now() < deadline) {
    seen = findColor(decodePng(await page.screenshot()), color)?.count ?? 0;
    if (seen < 10_000) await sleep(500);
  }
  assert.ok(seen >= 10_000, `${what}: ${seen} pixels of the colour`);
}

const green: [number, number, number] = [0, 160, 80];
const blue: [number, number, number] = [30, 60, 200];
const red: [number, number, number] = [200, 30, 30];
const yellow: [number, number, number] = [250, 230, 0];

/**
 * A page served by a process of the session itself: a coloured block, a button that turns it blue,
 * an input; both tell the server (its log is what the test reads back), so a click and typing are
 * seen to arrive where they were aimed, not only as pixels.
 */
const pageServer = `
import http.server, urllib.parse
PAGE = b"""<!doctype html><html><body style="margin:0;background:#fff">
<div id="block" style="width:400px;height:240px;background:rgb(${green.join(',')})"></div>
<button id="go" style="width:220px;height:90px;border:0;background:rgb(${red.join(',')})"
  onclick="document.getElementById('block').style.background='rgb(${blue.join(',')})';fetch('/log?clicked')"></button>
<input id="field" style="width:320px;height:60px;border:0;background:rgb(${yellow.join(',')});font-size:24px"
  oninput="fetch('/log?typed=' + encodeURIComponent(this.value))">
</body></html>"""
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/log?"):
            with open("/workspace/page.log", "a") as log:
                log.write(urllib.parse.unquote(self.path[5:]) + "\\n")
            body = b"ok"
        else:
            body = PAGE
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), Handler).serve_forever()
`;

/** A desktop in a real sandbox (the `desktop` template: Xvfb, openbox, Chromium in gVisor), seen and driven through SPACE's API, SDK and CLI. */
describe('desktop', () => {
  let platform: RunningPlatform;
  let api: Api;
  let space: Space;
  const sessions: string[] = [];
  // The template is built (or found built) before the suite: a first build takes a minute or two.
  platformForSuite(sessions, (p, a) => ((platform = p), (api = a), (space = new Space({ apiUrl: p.url, apiKey: p.adminKey }))), {
    // *.localhost is loopback to Chromium: the live view's host-form URL opens without DNS.
    env: { SPACE_TEMPLATES: 'tiny,desktop', SPACE_PREVIEW_DOMAIN: 'preview.localhost' },
  });

  const screen = async (session: Session) => decodePng(await session.desktop.screenshot());
  /** Polls the screen until `color` fills at least `pixels`, or fails naming what it saw. */
  async function until(session: Session, color: [number, number, number], pixels: number, what: string) {
    const deadline = Date.now() + 45_000;
    for (;;) {
      const found = findColor(await screen(session), color);
      if (found && found.count >= pixels) return found;
      if (Date.now() > deadline) assert.fail(`${what}: ${JSON.stringify(found)} after 45 s`);
      await sleep(500);
    }
  }
  const log = async (session: Session) => (await session.files.read('/workspace/page.log').catch(() => Buffer.from(''))).toString();
  async function untilLogged(session: Session, line: string) {
    const deadline = Date.now() + 20_000;
    while (!(await log(session)).split('\n').includes(line)) {
      if (Date.now() > deadline) assert.fail(`the page never logged ${JSON.stringify(line)}: ${JSON.stringify(await log(session))}`);
      await sleep(250);
    }
  }
  const center = (box: { x: number; y: number; width: number; height: number }): [number, number] => [
    box.x + Math.floor(box.width / 2),
    box.y + Math.floor(box.height / 2),
  ];

  /**
   * A connection with the outside that the browser has not closed yet refuses a full checkpoint
   * ("try again"; the node reset it): Chromium drops such idle sockets within about 10 s.
   */
  async function fullCheckpoint(session: Session) {
    const deadline = Date.now() + 40_000;
    for (;;) {
      try {
        return await session.checkpoint({ kind: 'full' });
      } catch (err) {
        if (!isSpaceApiError(err, 'FULL_CHECKPOINT_REFUSED') || Date.now() > deadline) throw err;
        console.log(`# full checkpoint refused, taken again in 2 s: ${err.message}`);
        await sleep(2000);
      }
    }
  }

  let browsing: Session;

  test("Chromium shows a page served in the session: the screenshot's pixels, a click that changes the page, typing that arrives", {
    timeout: 240_000,
  }, async () => {
    browsing = await space.sessions.create({
      template: 'desktop',
      env: { SPACE_DESKTOP_SIZE: '1024x768' },
      resources: { memoryMb: 1536 },
      checkpointIntervalSec: 0,
      fullCheckpointIntervalSec: 0,
      idleTimeoutSec: 0,
    });
    sessions.push(browsing.id);
    await browsing.files.write('/workspace/page.py', pageServer);
    await browsing.startBackground(['python3', '/workspace/page.py']);
    const state = await browsing.desktop.state();
    assert.deepEqual([state.running, state.width, state.height], [true, 1024, 768], 'the size asked for at create');

    const launched = await browsing.desktop.launch('chromium', 'http://127.0.0.1:8000/');
    assert.equal(launched.cmd[0], 'chromium');
    const block = await until(browsing, green, 400 * 240 * 0.9, 'the green block of the page');
    assert.ok(block.width >= 395 && block.height >= 235, JSON.stringify(block));
    const windows = await browsing.desktop.windows();
    assert.ok(
      windows.some((w) => w.app === 'Chromium' && w.title.includes('127.0.0.1:8000') && typeof w.focused === 'boolean'),
      JSON.stringify(windows),
    );

    const button = findColor(await screen(browsing), red);
    assert.ok(button && button.count > 200 * 80, JSON.stringify(button));
    await browsing.desktop.click(...center(button));
    await untilLogged(browsing, 'clicked');
    await until(browsing, blue, 400 * 240 * 0.9, 'the block turned blue by the click');
    assert.deepEqual(await browsing.desktop.cursor(), { x: center(button)[0], y: center(button)[1] });

    const field = findColor(await screen(browsing), yellow);
    assert.ok(field, 'the input');
    await browsing.desktop.click(...center(field));
    await browsing.desktop.type('hello from the agent');
    await untilLogged(browsing, 'typed=hello from the agent');

    // The same through the CLI: a screenshot to a file, a key.
    const file = path.join(tmpdir(), `space-desktop-${process.pid}.png`);
    const env = { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: platform.adminKey };
    try {
      await execFileAsync(process.execPath, [cliMain, 'screenshot', browsing.id, '-o', file, '--scale', '0.5'], { env });
      const half = decodePng(readFileSync(file));
      assert.deepEqual([half.width, half.height], [512, 384]);
      assert.ok((findColor(half, blue)?.count ?? 0) > 200 * 120 * 0.8, 'the blue block, half as large');
    } finally {
      rmSync(file, { force: true });
    }
    await execFileAsync(process.execPath, [cliMain, 'key', browsing.id, 'End', 'shift+Home', 'BackSpace'], { env });
    await untilLogged(browsing, 'typed=');
  });

  test('the desktop survives a kill of its sandbox (a full checkpoint holds X, the window manager and Chromium with its page), and a fork shows the same screen', {
    timeout: 240_000,
  }, async () => {
    assert.ok(browsing, 'the test before made the session');
    await browsing.desktop.type('kept');
    await untilLogged(browsing, 'typed=kept');
    const checkpoint = await fullCheckpoint(browsing);
    assert.equal(checkpoint.kind, 'full', JSON.stringify(checkpoint));
    console.log(`# full checkpoint of a desktop with Chromium open: paused ${checkpoint.pauseMs} ms, ${((checkpoint.sizeBytes ?? 0) / 1e6).toFixed(0)} MB`);
    await browsing.killSandbox();
    const resumedAt = Date.now();
    await until(browsing, blue, 400 * 240 * 0.9, 'the blue block after the kill');
    console.log(`# first screenshot after the kill (resume included): ${Date.now() - resumedAt} ms`);
    // The input kept its text: what is typed next arrives after it.
    await browsing.desktop.type('!');
    await untilLogged(browsing, 'typed=kept!');
    const last = (await api.call('GET', `/v1/sessions/${browsing.id}`)).body.sandboxHistory.at(-1);
    assert.equal(last.restoredFrom, checkpoint.id, 'restored from the memory checkpoint, not booted');

    const [fork] = await space.checkpoints.fork(checkpoint.id, { count: 1 });
    sessions.push(fork!.id);
    await until(fork!, blue, 400 * 240 * 0.9, "the fork's screen");
    assert.ok(
      (await fork!.desktop.windows()).some((w) => w.app === 'Chromium'),
      'the fork has the browser window',
    );
  });

  test('computer use from an MCP client: the screenshot as an MCP image, a click, typing, keys', { timeout: 120_000 }, async () => {
    assert.ok(browsing, 'the first test made the session');
    const client = new Client({ name: 'space-test', version: '0.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${platform.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${platform.adminKey}` } } }),
    );
    try {
      type Content = { type: string; text?: string; data?: string; mimeType?: string };
      const call = async (name: string, args: Record<string, unknown> = {}) => {
        const reply = (await client.callTool({ name, arguments: { sessionId: browsing.id, ...args } })) as { isError?: boolean; content: Content[] };
        assert.ok(!reply.isError, JSON.stringify(reply.content));
        return reply.content;
      };
      const shot = await call('screenshot', { scale: 0.5 });
      assert.match(shot[0]?.text ?? '', /^screen 1024x768, shown at scale 0.5$/);
      const image = shot.find((c) => c.type === 'image');
      assert.equal(image?.mimeType, 'image/png');
      const seen = decodePng(Buffer.from(image!.data!, 'base64'));
      assert.ok((findColor(seen, blue)?.count ?? 0) > 200 * 120 * 0.8, 'the page, as the model sees it');
      const field = findColor(await screen(browsing), yellow)!;
      await call('click', { x: center(field)[0], y: center(field)[1] });
      await call('key', { keys: ['End'] });
      await call('type', { text: '+mcp' });
      await untilLogged(browsing, 'typed=kept!+mcp');
      const refused = (await client.callTool({ name: 'key', arguments: { sessionId: browsing.id, keys: ['nosuchkey'] } })) as {
        isError?: boolean;
        content: Content[];
      };
      assert.equal(refused.isError, true);
      assert.match(refused.content[0]?.text ?? '', /^VALIDATION_FAILED: keys: unknown key/);
    } finally {
      await client.close();
    }
  });

  test("the live view for people: noVNC through the session's preview URL (a token, view-only) shows the desktop in a browser", {
    timeout: 120_000,
  }, async () => {
    assert.ok(browsing, 'the first test made the session');
    const stream = await browsing.desktop.stream();
    assert.equal(stream.viewOnly, true);
    assert.match(stream.url, new RegExp(`/v1/sessions/${browsing.id}/ports/6080/vnc\\.html\\?space_token=pt_`));
    assert.ok(stream.hostUrl?.startsWith(`http://6080-${browsing.id.slice(4)}.preview.localhost:`), stream.hostUrl ?? 'no host form');
    const listing = (await browsing.exec(['ps', '-eo', 'args'])).stdout;
    assert.match(listing, /x11vnc .*-localhost.*-viewonly/, `view-only, on loopback only:\n${listing}`);

    const browser = await testBrowser();
    try {
      await liveViewShows(browser, stream.hostUrl!, blue, 'the live view');
      const without = await (await browser.newPage()).goto(stream.hostUrl!.replace(/space_token=[^&]+/, 'space_token=pt_wrong'));
      assert.equal(without?.status(), 401, 'the token is the way in');
    } finally {
      await browser.close();
    }
    await execFileAsync(process.execPath, [cliMain, 'desktop', browsing.id, '--json'], {
      env: { ...process.env, SPACE_API_URL: platform.url, SPACE_API_KEY: platform.adminKey },
    }).then(({ stdout }) => assert.equal(JSON.parse(stdout).viewOnly, true));
  });

  test("the console's Desktop tab: the screen refreshed live, a click on the picture clicks the desktop there", { timeout: 120_000 }, async () => {
    assert.ok(browsing, 'the first test made the session');
    const button = findColor(await screen(browsing), red)!;
    const clicksBefore = (await log(browsing)).split('\n').filter((l) => l === 'clicked').length;
    const browser = await testBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      await page.goto(`${platform.url}/console`);
      await page.getByLabel('API key').fill(platform.adminKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.goto(`${platform.url}/console#/sessions/${browsing.id}`);
      await page.getByRole('tab', { name: 'Desktop' }).click();
      const picture = page.locator('img[data-desktop]');
      await picture.waitFor({ timeout: 30_000 });
      const shown = await picture.boundingBox();
      assert.ok(shown, 'the picture is laid out');
      const seen = findColor(decodePng(await picture.screenshot()), blue);
      assert.ok((seen?.count ?? 0) > 5000, `the page's blue block in the console: ${JSON.stringify(seen)}`);
      // The button's centre on the desktop, as a point of the picture (scaled to the page's width).
      const [bx, by] = center(button);
      await picture.click({ position: { x: (bx / 1024) * shown.width, y: (by / 768) * shown.height } });
      const deadline = Date.now() + 20_000;
      while ((await log(browsing)).split('\n').filter((l) => l === 'clicked').length === clicksBefore) {
        assert.ok(Date.now() < deadline, 'the click on the picture never reached the page');
        await sleep(250);
      }
    } finally {
      await browser.close();
    }
  });

  test("E2B Desktop's SDK unmodified (@e2b/desktop 2.4.0) against /e2b: create, screenshot, mouse, keyboard, launch, and its stream's URL open in a browser", {
    timeout: 240_000,
  }, async () => {
    const { id: tenantId } = (await api.call('POST', '/v1/tenants', { name: 'e2b-desktop' })).body;
    const apiKey = (await api.call('POST', '/v1/keys', { tenantId, format: 'e2b' })).body.key as string;
    // Its sandbox host names are `<port>-<id>.<domain>`: SPACE's preview host form.
    const domain = `preview.localhost:${new URL(platform.url).port}`;
    const started = Date.now();
    const sbx = await DesktopSandbox.create({ apiKey, apiUrl: `${platform.url}/e2b`, sandboxUrl: `${platform.url}/e2b/sandbox`, domain, timeoutMs: 300_000 });
    sessions.push(sbx.sandboxId);
    console.log(`# @e2b/desktop Sandbox.create (its Xvfb and XFCE checks included): ${Date.now() - started} ms`);
    try {
      const first = decodePng(Buffer.from(await sbx.screenshot()));
      assert.deepEqual([first.width, first.height], [1024, 768]);
      assert.deepEqual(await sbx.getScreenSize(), { width: 1024, height: 768 });
      await sbx.moveMouse(100, 120);
      assert.deepEqual(await sbx.getCursorPosition(), { x: 100, y: 120 });

      await sbx.files.write('/workspace/page.py', pageServer);
      await sbx.commands.run('python3 /workspace/page.py', { background: true });
      await sbx.launch('chromium', 'http://127.0.0.1:8000/');
      const seen = async (color: [number, number, number], pixels: number, what: string) => {
        const deadline = Date.now() + 45_000;
        for (;;) {
          const found = findColor(decodePng(Buffer.from(await sbx.screenshot())), color);
          if (found && found.count >= pixels) return found;
          if (Date.now() > deadline) assert.fail(`${what}: ${JSON.stringify(found)}`);
          await sleep(500);
        }
      };
      await seen(green, 400 * 240 * 0.9, 'the page in Chromium, started by gtk-launch');
      const logged = async (line: string) => {
        const deadline = Date.now() + 20_000;
        while (!(await sbx.files.read('/workspace/page.log').catch(() => '')).split('\n').includes(line)) {
          if (Date.now() > deadline) assert.fail(`never logged ${line}`);
          await sleep(250);
        }
      };
      const button = await seen(red, 200 * 80, 'the button');
      await sbx.leftClick(...center(button));
      await logged('clicked');
      await seen(blue, 400 * 240 * 0.9, 'the block turned blue');
      const field = await seen(yellow, 300 * 50, 'the input');
      await sbx.leftClick(...center(field));
      await sbx.write('typed by e2b');
      await logged('typed=typed by e2b');
      await sbx.press('backspace');
      await logged('typed=typed by e2');

      await sbx.stream.start();
      const url = sbx.stream.getUrl({ viewOnly: true });
      assert.match(url, new RegExp(`^https://6080-${sbx.sandboxId}\\.preview\\.localhost:\\d+/vnc\\.html\\?`));
      // No TLS in front of this test's control plane: the same URL over http.
      const browser = await testBrowser();
      try {
        await liveViewShows(browser, url.replace(/^https:/, 'http:'), blue, "E2B's stream");
      } finally {
        await browser.close();
      }
      await sbx.stream.stop();
    } finally {
      await sbx.kill();
    }
  });

  test('a terminal on the desktop runs what is typed into it', { timeout: 120_000 }, async () => {
    assert.ok(browsing, 'the first test made the session');
    const started = await browsing.desktop.launch('terminal');
    assert.equal(started.cmd[0], 'st');
    const deadline = Date.now() + 30_000;
    while (!(await browsing.desktop.windows()).some((w) => w.app === 'st-256color' && w.focused)) {
      assert.ok(Date.now() < deadline, JSON.stringify(await browsing.desktop.windows()));
      await sleep(250);
    }
    await browsing.desktop.type('echo typed-in-the-terminal > /tmp/terminal-proof');
    await browsing.desktop.key('Return');
    const until = Date.now() + 20_000;
    while ((await browsing.exec(['sh', '-c', 'cat /tmp/terminal-proof 2>/dev/null'])).stdout !== 'typed-in-the-terminal\n') {
      assert.ok(Date.now() < until, 'the command typed into the terminal never ran');
      await sleep(250);
    }
  });

  test('bad input is refused naming the field; a session without the desktop template is 409 NO_DESKTOP', { timeout: 120_000 }, async () => {
    assert.ok(browsing, 'the first test made the session');
    const input = (body: unknown) => api.call('POST', `/v1/sessions/${browsing.id}/desktop/input`, body);
    const refused = async (reply: Promise<{ status: number; body: { error?: { code: string; message: string } } }>, status: number, field: RegExp) => {
      const { status: got, body } = await reply;
      assert.equal(got, status, JSON.stringify(body));
      assert.match(body.error?.message ?? '', field);
    };
    await refused(input({ type: 'move', x: 1024, y: 10 }), 400, /^x: an integer from 0 to 1023/);
    await refused(input({ type: 'move', x: 99_999, y: 10 }), 400, /x/);
    await refused(input({ type: 'key', keys: 'ctrl+nosuchkey' }), 400, /keys: unknown key 'nosuchkey'/);
    await refused(input({ type: 'type', text: 'x'.repeat(10_001) }), 400, /text/);
    await refused(input({ type: 'wave' }), 400, /type/);
    await refused(api.call('GET', `/v1/sessions/${browsing.id}/desktop/screenshot?scale=2`), 400, /scale/);
    await refused(api.call('POST', `/v1/sessions/${browsing.id}/desktop/launch`, { app: 'chromium', cmd: ['true'] }), 400, /app or cmd/);

    const plain = await api.createSession({ template: 'tiny', checkpointIntervalSec: 0, fullCheckpointIntervalSec: 0 });
    sessions.push(plain.id);
    const none = await api.call('GET', `/v1/sessions/${plain.id}/desktop/windows`);
    assert.deepEqual([none.status, none.body.error?.code], [409, 'NO_DESKTOP'], JSON.stringify(none.body));
  });

  test('a display that dies is started again by the next call, and says so', { timeout: 120_000 }, async () => {
    assert.ok(browsing, 'the first test made the session');
    await browsing.exec(['pkill', '-9', '-x', 'Xvfb']);
    const state = await browsing.desktop.state();
    assert.equal(state.running, true);
    assert.ok(state.restarts >= 1 && /Xvfb exited/.test(state.lastExit ?? ''), JSON.stringify(state));
    const image = await screen(browsing);
    assert.deepEqual([image.width, image.height], [1024, 768], 'a fresh display of the same size');
  });
});
