#!/usr/bin/env python3
"""SPACE's desktop, inside a sandbox: an X display an agent sees (screenshots) and drives (input).

The in-sandbox agent starts this server at boot in a template that has a desktop (the `desktop`
template's marker), before it answers any call, and the server starts the display before its
socket answers (one that answers already is taken on as it is); the agent is its only client: it
listens on a Unix socket, never TCP. The display (Xvfb), its window manager (xfwm4, XFCE's, so
that E2B Desktop's SDK, which starts XFCE, finds it running) and what is launched on it are this
server's children in the sandbox, so a full checkpoint holds them all with their windows; when
the server starts again (after a restart of the agent's, or in a restored sandbox) it takes on a
display that still answers instead of starting another.

Routes (JSON unless said otherwise; the protocol package's `desktop.ts` has their shapes, and the
layers above validate them again):

  GET  /state                                  the display: size, DPI, whether it runs, restarts
  GET  /screenshot?x=&y=&width=&height=&scale= image/png of the screen or a region
  POST /input {type, ...}                      move, click, double_click, down, up, drag, scroll, key, type
  POST /launch {app | cmd, url?}               start an application on the display
  GET  /windows                                the window manager's windows: title, app, geometry, focused
  GET  /cursor                                 where the pointer is
  POST /vnc {viewOnly}                         the live view: x11vnc on the display (view-only unless
                                               asked), noVNC and its WebSocket bridge on VNC_WEB_PORT

A display that died (Xvfb crashed or was killed) is started again by the next call, which says so
in `/state` (`restarts`, `lastExit`); windows on the old display are gone with it.
"""

import argparse
import io
import os
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

from space_desktop_display import DESKTOP_TMP, DISPLAY, ApiError, Display, shell_values, stop, wait_listening
from space_desktop_input import Input
from space_unix_http import JsonRequests, serve, validation

# Chromium: the flags it needs in gVisor, and the directories of files it deletes while open, are
# the template's (/etc/chromium.d/space-sandbox, which Debian's chromium wrapper reads), so that any
# way of starting it (this server, a command, xdg-open, E2B Desktop's gtk-launch) gets them.
CHROMIUM = ["chromium", "--start-maximized"]
# The terminal is st (Debian's stterm), which opens its pty's replica before it reads the master:
# xterm cannot open its pty in this runsc (a read of a pty master before its replica is opened fails
# with EIO there, where Linux blocks: gVisor issue 13738).
APPS = {
    "chromium": CHROMIUM,
    "browser": CHROMIUM,
    "google-chrome": CHROMIUM,
    "terminal": ["st"],
}
# The live view: x11vnc on loopback only, noVNC's page and WebSocket bridge (websockify) on a port
# the session's preview URLs reach (the control plane hands out a token for it).
VNC_PORT = 5900
VNC_WEB_PORT = 6080
NOVNC_DIR = "/usr/share/novnc"


class Desktop:
    """What the routes do: screenshots, input (space_desktop_input.py), applications, windows, the live view."""

    def __init__(self):
        self.display = Display()
        self.input = Input(self.display)
        self.vnc_lock = threading.Lock()
        self.vnc_server = None
        self.vnc_view_only = True
        self.vnc_web = None

    def screenshot(self, query):
        from PIL import ImageGrab  # the desktop template's python3-pil, built with XCB

        width, height = self.display.size

        def number(name, low, high, default, kind=int):
            raw = query.get(name, [None])[0]
            if raw is None:
                return default
            try:
                value = kind(raw)
            except ValueError:
                raise validation(name, f"a number from {low} to {high}")
            if not low <= value <= high:
                raise validation(name, f"a number from {low} to {high}")
            return value

        x = number("x", 0, width - 1, 0)
        y = number("y", 0, height - 1, 0)
        w = number("width", 1, width - x, width - x)
        h = number("height", 1, height - y, height - y)
        scale = number("scale", 0.05, 1.0, 1.0, float)
        image = ImageGrab.grab(bbox=(x, y, x + w, y + h), xdisplay=DISPLAY)
        if scale < 1:
            image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))))
        out = io.BytesIO()
        image.convert("RGB").save(out, "PNG", compress_level=1)
        return out.getvalue()

    def launch(self, body):
        app, cmd, url = body.get("app"), body.get("cmd"), body.get("url")
        if (app is None) == (cmd is None):
            raise validation("app", "give app or cmd, not both")
        if app is not None:
            argv = APPS.get(app)
            if argv is None:
                raise validation("app", f"one of {', '.join(sorted(APPS))} (or cmd)")
            argv = list(argv)
            if url is not None:
                if not isinstance(url, str) or len(url) > 4096:
                    raise validation("url", "a URL of at most 4096 characters")
                argv.append(url)
        else:
            if not isinstance(cmd, list) or not cmd or not all(isinstance(c, str) for c in cmd) or len(cmd) > 100:
                raise validation("cmd", "an argv: a non-empty list of strings")
            if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
                raise ApiError(404, "FILE_NOT_FOUND", f"cmd: {cmd[0]} is not installed")
            argv = cmd
        self.display.launched += 1
        process = self.display.spawn(argv, f"launch-{os.path.basename(argv[0])}")
        return {"pid": process.pid, "cmd": argv}

    def windows(self):
        d = self.display
        listed = d.x_tool("xprop", "-root", "_NET_CLIENT_LIST", "_NET_ACTIVE_WINDOW", check=False, timeout=10)
        ids, active = [], None
        for line in listed.splitlines():
            values = line.split("#", 1)[1].replace(",", " ").split() if "#" in line else []
            if line.startswith("_NET_CLIENT_LIST("):
                ids = values
            elif line.startswith("_NET_ACTIVE_WINDOW(") and values:
                active = int(values[0], 16)
        windows = []
        for window in (int(hex_id, 16) for hex_id in ids[:100]):
            props = d.x_tool("xprop", "-id", str(window), "_NET_WM_NAME", "WM_CLASS", check=False, timeout=10)
            title, app = "", ""
            for line in props.splitlines():
                if line.startswith("_NET_WM_NAME") and "=" in line:
                    title = parse_xprop_string(line.split("=", 1)[1])
                elif line.startswith("WM_CLASS") and "=" in line:
                    names = [parse_xprop_string(part) for part in line.split("=", 1)[1].split(",")]
                    app = names[-1] if names else ""
            try:
                geometry = shell_values(d.xdotool("getwindowgeometry", "--shell", str(window)))
            except ApiError:
                continue  # closed meanwhile
            windows.append(
                {
                    "id": str(window),
                    "title": title[:1000],
                    "app": app[:200],
                    "x": int(geometry.get("X", 0)),
                    "y": int(geometry.get("Y", 0)),
                    "width": int(geometry.get("WIDTH", 0)),
                    "height": int(geometry.get("HEIGHT", 0)),
                    "focused": active == window,
                }
            )
        return {"windows": windows}

    def vnc(self, body):
        view_only = body.get("viewOnly", True)
        if not isinstance(view_only, bool):
            raise validation("viewOnly", "true or false")
        with self.vnc_lock:
            if self.vnc_server is not None and (self.vnc_server.poll() is not None or self.vnc_view_only != view_only):
                stop(self.vnc_server)
                self.vnc_server = None
            if self.vnc_server is None:
                argv = ["x11vnc", "-display", DISPLAY, "-rfbport", str(VNC_PORT), "-localhost", "-forever", "-shared", "-nopw", "-quiet"]
                self.vnc_server = self.display.spawn([*argv, "-viewonly"] if view_only else argv, "x11vnc")
                self.vnc_view_only = view_only
                wait_listening(VNC_PORT, self.vnc_server, "x11vnc", self.display)
            if self.vnc_web is None or self.vnc_web.poll() is not None:
                self.vnc_web = self.display.spawn(["websockify", "--web", NOVNC_DIR, str(VNC_WEB_PORT), f"127.0.0.1:{VNC_PORT}"], "websockify")
                wait_listening(VNC_WEB_PORT, self.vnc_web, "websockify", self.display)
        return {"port": VNC_WEB_PORT, "viewOnly": view_only}

    def cursor(self):
        values = shell_values(self.display.xdotool("getmouselocation", "--shell"))
        return {"x": int(values.get("X", 0)), "y": int(values.get("Y", 0))}


def parse_xprop_string(raw):
    raw = raw.strip()
    if raw.startswith('"') and raw.endswith('"'):
        return raw[1:-1].encode("latin-1", errors="replace").decode("unicode_escape", errors="replace").encode("latin-1", errors="replace").decode("utf-8", errors="replace")
    return raw


class Handler(JsonRequests, BaseHTTPRequestHandler):
    server_version = "space-desktop-server"

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def dispatch(self, method):
        desktop = self.server.desktop
        try:
            path, _, query = self.path.partition("?")
            if method == "POST" and path == "/session":
                desktop.display.configure(self.body().get("env") or {})
                return self.reply(200, {"ok": True})
            desktop.display.ensure()
            if method == "GET" and path == "/state":
                return self.reply(200, desktop.display.state())
            if method == "GET" and path == "/screenshot":
                return self.send_bytes(desktop.screenshot(parse_qs(query)), "image/png")
            if method == "POST" and path == "/input":
                return self.reply(200, desktop.input.send(self.body()))
            if method == "POST" and path == "/launch":
                return self.reply(200, desktop.launch(self.body()))
            if method == "GET" and path == "/windows":
                return self.reply(200, desktop.windows())
            if method == "GET" and path == "/cursor":
                return self.reply(200, desktop.cursor())
            if method == "POST" and path == "/vnc":
                return self.reply(200, desktop.vnc(self.body()))
            raise ApiError(404, "ROUTE_NOT_FOUND", f"{method} {self.path[:200]} is not a desktop route")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:
            self.reply_error(e)

    def body(self):
        return super().body(256 * 1024)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.run_dir, mode=0o700, exist_ok=True)
    os.makedirs(DESKTOP_TMP, exist_ok=True)
    os.chmod(DESKTOP_TMP, 0o1777)
    desktop = Desktop()
    # Started with the session's environment (the agent's): its display settings hold from the first
    # call. The display is started before the socket answers: the agent waits for it at boot.
    desktop.display.configure(dict(os.environ))
    try:
        desktop.display.ensure()
    except ApiError as e:
        print(f"space-desktop-server: the display did not start: {e.message}", file=sys.stderr, flush=True)
    serve(args.socket, Handler, "space-desktop-server", desktop=desktop)


if __name__ == "__main__":
    main()
