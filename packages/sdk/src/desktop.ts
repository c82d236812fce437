import type { CallOptions } from './options.js';
import type { Transport } from './transport.js';

export type MouseButton = 'left' | 'middle' | 'right';

/** One input on the desktop (`POST /v1/sessions/:id/desktop/input`); coordinates are the screen's pixels. */
export type DesktopInputData =
  | { type: 'move'; x: number; y: number }
  | { type: 'click' | 'double_click' | 'down' | 'up'; x?: number; y?: number; button?: MouseButton }
  | { type: 'drag'; x: number; y: number; toX: number; toY: number }
  | { type: 'scroll'; x?: number; y?: number; direction?: 'up' | 'down' | 'left' | 'right'; amount?: number }
  | { type: 'key'; keys: string | string[] }
  | { type: 'type'; text: string; delayMs?: number };

/** A window the desktop's window manager knows. */
export interface DesktopWindowData {
  id: string;
  title: string;
  app: string;
  x: number;
  y: number;
  width: number;
  height: number;
  focused: boolean;
}

/** The display: its size and DPI, and how often it was started again after dying. */
export interface DesktopStateData {
  running: boolean;
  width: number;
  height: number;
  dpi: number;
  display: string;
  restarts: number;
  lastExit: string | null;
}

/** A region of the screen and a scale (0.05–1), all optional. */
export interface ScreenshotOptions extends CallOptions {
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  scale?: number;
}

/** A live view for people (`session.desktop.stream()`): noVNC's page through the session's preview URLs, with a token. */
export interface DesktopStreamData {
  /** The path form; noVNC's page needs `hostUrl` (a preview domain): its scripts cannot load in the path form's opaque origin. */
  url: string;
  hostUrl: string | null;
  viewOnly: boolean;
  expiresAt: string;
}

export type DesktopApp = 'chromium' | 'browser' | 'google-chrome' | 'terminal';

/**
 * A session's desktop (template `desktop`): `await session.desktop.screenshot()` is a PNG of the
 * screen; `click`, `type`, `key` drive it; `launch('chromium', url)` opens a browser. The display
 * starts on the first call. A session of another template gets `409 NO_DESKTOP`.
 */
export class SessionDesktop {
  constructor(
    private readonly t: Transport,
    private readonly base: string,
  ) {}

  /** A PNG of the screen, or of a region, made smaller by `scale`. */
  async screenshot(opts: ScreenshotOptions = {}): Promise<Buffer> {
    const { x, y, width, height, scale, ...call } = opts;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries({ x, y, width, height, scale })) if (value !== undefined) query.set(name, String(value));
    const res = await this.t.request('GET', `${this.base}/desktop/screenshot${query.size ? `?${query}` : ''}`, call);
    return Buffer.from(await res.arrayBuffer());
  }

  async input(input: DesktopInputData, opts: CallOptions = {}): Promise<void> {
    await this.t.json('POST', `${this.base}/desktop/input`, { ...opts, json: input });
  }

  moveMouse(x: number, y: number, opts: CallOptions = {}): Promise<void> {
    return this.input({ type: 'move', x, y }, opts);
  }

  /** A click at `x`, `y` (else where the pointer is). */
  click(x?: number, y?: number, opts: CallOptions & { button?: MouseButton; double?: boolean } = {}): Promise<void> {
    const { button, double, ...call } = opts;
    return this.input({ type: double ? 'double_click' : 'click', x, y, ...(button ? { button } : {}) }, call);
  }

  drag(from: [number, number], to: [number, number], opts: CallOptions = {}): Promise<void> {
    return this.input({ type: 'drag', x: from[0], y: from[1], toX: to[0], toY: to[1] }, opts);
  }

  scroll(direction: 'up' | 'down' | 'left' | 'right' = 'down', amount = 1, opts: CallOptions = {}): Promise<void> {
    return this.input({ type: 'scroll', direction, amount }, opts);
  }

  /** A key chord as X names keys (`Return`, `ctrl+c`, `F5`; `enter`, `esc` too), or several one after another. */
  key(keys: string | string[], opts: CallOptions = {}): Promise<void> {
    return this.input({ type: 'key', keys }, opts);
  }

  /** Types text into the focused window. */
  type(text: string, opts: CallOptions & { delayMs?: number } = {}): Promise<void> {
    const { delayMs, ...call } = opts;
    return this.input({ type: 'type', text, ...(delayMs === undefined ? {} : { delayMs }) }, call);
  }

  /** Starts an application on the desktop: a known one by name (with a URL for the browser), or `{ cmd: argv }`. */
  async launch(app: DesktopApp | { cmd: string[] }, url?: string, opts: CallOptions = {}): Promise<{ pid: number; cmd: string[] }> {
    const json = typeof app === 'string' ? { app, ...(url === undefined ? {} : { url }) } : { cmd: app.cmd };
    return this.t.json('POST', `${this.base}/desktop/launch`, { ...opts, json });
  }

  async windows(opts: CallOptions = {}): Promise<DesktopWindowData[]> {
    return (await this.t.json<{ windows: DesktopWindowData[] }>('GET', `${this.base}/desktop/windows`, opts)).windows;
  }

  cursor(opts: CallOptions = {}): Promise<{ x: number; y: number }> {
    return this.t.json('GET', `${this.base}/desktop/cursor`, opts);
  }

  /** A live view of the desktop for people, view-only unless `viewOnly: false`; its URL works for `ttlSec` (default an hour). */
  stream(opts: CallOptions & { viewOnly?: boolean; ttlSec?: number } = {}): Promise<DesktopStreamData> {
    const { viewOnly, ttlSec, ...call } = opts;
    return this.t.json('POST', `${this.base}/desktop/stream`, {
      ...call,
      json: { ...(viewOnly === undefined ? {} : { viewOnly }), ...(ttlSec === undefined ? {} : { ttlSec }) },
    });
  }

  state(opts: CallOptions = {}): Promise<DesktopStateData> {
    return this.t.json('GET', `${this.base}/desktop/state`, opts);
  }
}
