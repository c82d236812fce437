import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import type { DesktopApp, MouseButton, SessionDesktop } from '@space/sdk';
import { cliClient, output } from '../client.js';

const desktopOf = (session: string): SessionDesktop => cliClient(process.env).sessions.handle(session).desktop;

/** A whole number of pixels, for commander's parsers. */
function pixels(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`expected a pixel coordinate, got ${JSON.stringify(value)}`);
  return n;
}

/** `x,y,width,height`. */
function region(value: string): { x: number; y: number; width: number; height: number } {
  const parts = value.split(',').map(pixels);
  if (parts.length !== 4) throw new Error(`expected x,y,width,height, got ${JSON.stringify(value)}`);
  const [x, y, width, height] = parts as [number, number, number, number];
  return { x, y, width, height };
}

/** Computer use from the command line: the session's desktop (template `desktop`) seen and driven. */
export function registerDesktopCommands(program: Command): void {
  program
    .command('screenshot <session>')
    .description("a PNG of the session's desktop (template desktop)")
    .requiredOption('-o, --output <file>', 'where the PNG goes')
    .option('--region <x,y,width,height>', 'only this part of the screen', region)
    .option('--scale <factor>', 'smaller by this factor (0.05-1)', Number)
    .option('--json', 'print {file, bytes} as JSON')
    .action(async (session: string, opts: { output: string; region?: ReturnType<typeof region>; scale?: number; json?: boolean }) => {
      const png = await desktopOf(session).screenshot({ ...opts.region, ...(opts.scale === undefined ? {} : { scale: opts.scale }) });
      await writeFile(opts.output, png);
      output(Boolean(opts.json), { file: opts.output, bytes: png.length }, () => `${opts.output} (${png.length} bytes)`);
    });

  program
    .command('click <session> [x] [y]')
    .description('click on the desktop at x y (else where the pointer is)')
    .option('--button <button>', 'left, middle or right', 'left')
    .option('--double', 'a double click')
    .action(async (session: string, x: string | undefined, y: string | undefined, opts: { button: MouseButton; double?: boolean }) => {
      if ((x === undefined) !== (y === undefined)) throw new Error('give both x and y, or neither');
      await desktopOf(session).click(x === undefined ? undefined : pixels(x), y === undefined ? undefined : pixels(y), opts);
    });

  program
    .command('type <session> <text>')
    .description('type text into the focused window of the desktop')
    .action(async (session: string, text: string) => desktopOf(session).type(text));

  program
    .command('key <session> <keys...>')
    .description('press keys on the desktop, one chord after another: Return, ctrl+c, ctrl+shift+t, F5')
    .action(async (session: string, keys: string[]) => desktopOf(session).key(keys));

  program
    .command('launch <session> <app> [args...]')
    .description('start an application on the desktop: chromium [URL], terminal; with --cmd, APP and ARGS are any command (after --: its options)')
    .option('--cmd', 'APP and ARGS are a command to run')
    .option('--json', 'print {pid, cmd} as JSON')
    .action(async (session: string, app: string, args: string[], opts: { cmd?: boolean; json?: boolean }) => {
      if (!opts.cmd && args.length > 1) throw new Error(`${app} takes one URL at most; use --cmd for a command with arguments`);
      const desktop = desktopOf(session);
      const started = opts.cmd ? await desktop.launch({ cmd: [app, ...args] }) : await desktop.launch(app as DesktopApp, args[0]);
      output(Boolean(opts.json), started, () => `started ${started.cmd[0]} (pid ${started.pid})`);
    });

  program
    .command('desktop <session>')
    .description("a live view of the session's desktop for people (noVNC in a browser): prints its URL, view-only unless --interactive")
    .option('--interactive', 'the viewer may click and type too')
    .option('--ttl <sec>', 'how long the URL works (default 3600)', Number)
    .option('--json', 'print {url, hostUrl, viewOnly, expiresAt} as JSON')
    .action(async (session: string, opts: { interactive?: boolean; ttl?: number; json?: boolean }) => {
      const stream = await desktopOf(session).stream({ viewOnly: !opts.interactive, ...(opts.ttl === undefined ? {} : { ttlSec: opts.ttl }) });
      output(
        Boolean(opts.json),
        stream,
        () => stream.hostUrl ?? `${stream.url}\n(noVNC's page needs the host form of preview URLs: set SPACE_PREVIEW_DOMAIN on the control plane)`,
      );
    });

  program
    .command('windows <session>')
    .description("the desktop's windows: title, application, geometry, which has the focus")
    .option('--json', 'print JSON')
    .action(async (session: string, opts: { json?: boolean }) => {
      const windows = await desktopOf(session).windows();
      output(Boolean(opts.json), windows, () =>
        windows.length
          ? windows
              .map((w) => `${w.focused ? '*' : ' '} ${w.id.padEnd(10)} ${`${w.width}x${w.height}+${w.x}+${w.y}`.padEnd(20)} ${w.app}: ${w.title}`)
              .join('\n')
          : 'no windows',
      );
    });
}
