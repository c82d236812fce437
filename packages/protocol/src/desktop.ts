import { z } from 'zod';
import { CreatePreviewTokenRequestSchema } from './ports.js';

/**
 * A session's desktop (the `desktop` template): an X display the in-sandbox agent's desktop server
 * runs, seen through screenshots and driven by input. Each layer validates these shapes; the
 * server checks coordinates against the screen's size and key names against X's keysyms.
 */

/** The largest screen a desktop may have (8K), so coordinates are bounded before the screen's own size is known. */
export const maxDesktopPixels = 7680;

/** The most characters one `type` input sends. */
export const maxDesktopText = 10_000;

/** The largest screenshot relayed (a PNG of an 8K screen at level 1 stays well under it). */
export const maxScreenshotBytes = 64 * 1024 * 1024;

const coordinate = z.number().int().min(0).max(maxDesktopPixels);
const button = z.enum(['left', 'middle', 'right']);
/** A key chord as X names keys: `Return`, `ctrl+c`, `ctrl+shift+t`, `F5` (also `enter`, `esc`, `cmd`, …). */
const keyChord = z.string().min(1).max(100);

export const DesktopInputSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('move'), x: coordinate, y: coordinate }).strict(),
  /** At `x`, `y` when given, else where the pointer is. */
  z.object({ type: z.literal('click'), x: coordinate.optional(), y: coordinate.optional(), button: button.default('left') }).strict(),
  z.object({ type: z.literal('double_click'), x: coordinate.optional(), y: coordinate.optional(), button: button.default('left') }).strict(),
  /** A button pressed (held until `up`). */
  z.object({ type: z.literal('down'), x: coordinate.optional(), y: coordinate.optional(), button: button.default('left') }).strict(),
  z.object({ type: z.literal('up'), x: coordinate.optional(), y: coordinate.optional(), button: button.default('left') }).strict(),
  /** The left button pressed at `x`, `y`, moved to `toX`, `toY`, released. */
  z.object({ type: z.literal('drag'), x: coordinate, y: coordinate, toX: coordinate, toY: coordinate }).strict(),
  z
    .object({
      type: z.literal('scroll'),
      x: coordinate.optional(),
      y: coordinate.optional(),
      direction: z.enum(['up', 'down', 'left', 'right']).default('down'),
      amount: z.number().int().min(1).max(100).default(1),
    })
    .strict(),
  /** One chord, or several pressed one after another. */
  z.object({ type: z.literal('key'), keys: z.union([keyChord, z.array(keyChord).min(1).max(50)]) }).strict(),
  z
    .object({
      type: z.literal('type'),
      text: z.string().min(1).max(maxDesktopText),
      /** Between keystrokes (xdotool's default is 12 ms). */
      delayMs: z.number().int().min(0).max(1000).optional(),
    })
    .strict(),
]);
export type DesktopInput = z.input<typeof DesktopInputSchema>;

/** A region and a scale, all optional: the whole screen at its size by default. */
export const ScreenshotQuerySchema = z
  .object({
    x: z.coerce.number().int().min(0).max(maxDesktopPixels).optional(),
    y: z.coerce.number().int().min(0).max(maxDesktopPixels).optional(),
    width: z.coerce.number().int().min(1).max(maxDesktopPixels).optional(),
    height: z.coerce.number().int().min(1).max(maxDesktopPixels).optional(),
    /** 0.05–1: the PNG made smaller (fewer tokens for a model). */
    scale: z.coerce.number().min(0.05).max(1).optional(),
  })
  .strict();
export type ScreenshotQuery = z.infer<typeof ScreenshotQuerySchema>;

/** An application the desktop knows by name (`chromium`, alias `browser` or `google-chrome`, with a URL; `terminal`), or an argv. */
export const DesktopLaunchRequestSchema = z
  .object({
    app: z.enum(['chromium', 'browser', 'google-chrome', 'terminal']).optional(),
    url: z.string().min(1).max(4096).optional(),
    cmd: z.array(z.string().max(4096)).min(1).max(100).optional(),
  })
  .strict()
  .refine((r) => (r.app === undefined) !== (r.cmd === undefined), { message: 'give app or cmd, not both', path: ['app'] })
  .refine((r) => r.url === undefined || r.app !== undefined, { message: 'url goes with app', path: ['url'] });
export type DesktopLaunchRequest = z.infer<typeof DesktopLaunchRequestSchema>;

export const DesktopLaunchedSchema = z.object({ pid: z.number().int().positive(), cmd: z.array(z.string().max(4096)).max(200) }).strict();

export const DesktopWindowSchema = z
  .object({
    id: z.string().max(32),
    title: z.string().max(1000),
    app: z.string().max(200),
    x: z.number().int(),
    y: z.number().int(),
    width: z.number().int().nonnegative(),
    height: z.number().int().nonnegative(),
    focused: z.boolean(),
  })
  .strict();
export type DesktopWindow = z.infer<typeof DesktopWindowSchema>;

export const DesktopWindowListSchema = z.object({ windows: z.array(DesktopWindowSchema).max(100) }).strict();

export const DesktopCursorSchema = z.object({ x: z.number().int(), y: z.number().int() }).strict();

/** The display: its size and DPI (`SPACE_DESKTOP_SIZE`, `SPACE_DESKTOP_DPI` in the session's env), and how often it was started again after dying. */
export const DesktopStateSchema = z
  .object({
    running: z.boolean(),
    width: z.number().int().positive(),
    height: z.number().int().positive(),
    dpi: z.number().int().positive(),
    display: z.string().max(32),
    restarts: z.number().int().nonnegative(),
    lastExit: z.string().max(1000).nullable(),
  })
  .strict();
export type DesktopState = z.infer<typeof DesktopStateSchema>;

/** The live view's servers in the sandbox (x11vnc, noVNC): view-only unless asked. */
export const DesktopVncRequestSchema = z.object({ viewOnly: z.boolean().default(true) }).strict();
/** The port the sandbox serves noVNC and its WebSocket on. */
export const DesktopVncSchema = z.object({ port: z.number().int().min(1).max(65535), viewOnly: z.boolean() }).strict();

/** A live view for people: view-only unless `viewOnly: false`; the URL works for `ttlSec` (a preview token's). */
export const DesktopStreamRequestSchema = CreatePreviewTokenRequestSchema.extend({ viewOnly: z.boolean().default(true) }).strict();

/** noVNC's page through the session's preview URLs, its token in it: opened in a browser, it shows the desktop live. */
export const DesktopStreamSchema = z
  .object({
    url: z.string(),
    /** On the port's own host (`SPACE_PREVIEW_DOMAIN`); null without one. */
    hostUrl: z.string().nullable(),
    viewOnly: z.boolean(),
    expiresAt: z.string(),
  })
  .strict();
export type DesktopStream = z.infer<typeof DesktopStreamSchema>;
