#!/usr/bin/env python3
"""SPACE's desktop, inside a sandbox: an X display an agent sees (screenshots) and drives (input).

The in-sandbox agent starts this server on the first desktop call in a template that has a
desktop (the `desktop` template's marker) and is its only client: it listens on a Unix socket,
never TCP. The display (Xvfb), its window manager (openbox) and what is launched on it are this
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
import ctypes
import ctypes.util
import io
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

DISPLAY = ":0"
X_SOCKET = "/tmp/.X11-unix/X0"
DEFAULT_SIZE = (1280, 800)
DEFAULT_DPI = 96
MAX_TEXT = 10000
# xdotool's names for the modifiers of a chord, besides keysyms (Control_L…) themselves.
MODIFIERS = {"ctrl", "control", "alt", "shift", "super", "meta"}
# Common names agents use for keys, as X keysyms.
KEY_ALIASES = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "space": "space",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Prior",
    "pagedown": "Next",
    "insert": "Insert",
    "cmd": "super",
    "win": "super",
    "windows": "super",
    "option": "alt",
}
BUTTONS = {"left": "1", "middle": "2", "right": "3"}
SCROLL_BUTTONS = {"up": "4", "down": "5", "left": "6", "right": "7"}
# Where what runs on the desktop keeps its temporary files: gVisor's own tmpfs under /dev, not the
# volume. Chromium keeps shared memory in files it unlinks while open (executable ones in TMPDIR,
# since /dev/shm is noexec); on the volume (through the gofer) such files make a full checkpoint fail
# ("deleted and invalidated dentries can't be restored"), in the sandbox's own memory they are saved.
DESKTOP_TMP = "/dev/.space-desktop-tmp"
# Chromium in gVisor: no setuid sandbox of its own (the sandbox is gVisor), no GPU. And none of
# its own traffic (updates, network time, metrics, sync, safe browsing lists, translation): a connection with the
# outside open at a full checkpoint makes the checkpoint wait or fail, so only what a page asks for
# goes out.
CHROMIUM = [
    "chromium",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--password-store=basic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--no-pings",
    "--safebrowsing-disable-auto-update",
    "--disable-features=NetworkTimeServiceQuerying,Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
    "--start-maximized",
]
# Chromium's profile stays on the volume (cookies and logins are files a fs checkpoint keeps), but
# its metrics files go to DESKTOP_TMP: it deletes them while they are mapped, which on the volume
# makes a full checkpoint fail, whatever the flags.
CHROMIUM_PROFILE_TMP = [".config/chromium/BrowserMetrics"]


def keep_in_memory(home):
    """Chromium's directories of files it deletes while open, as links into DESKTOP_TMP."""
    for relative in CHROMIUM_PROFILE_TMP:
        link = os.path.join(home, relative)
        if os.path.islink(link):
            continue
        shutil.rmtree(link, ignore_errors=True)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        target = os.path.join(DESKTOP_TMP, relative.replace("/", "-"))
        os.makedirs(target, exist_ok=True)
        os.symlink(target, link)


# xterm is installed but not offered: it cannot open its pty in this runsc (a read of a pty master
# before its replica is opened fails with EIO there, where Linux blocks: gVisor issue 13738).
APPS = {
    "chromium": CHROMIUM,
    "browser": CHROMIUM,
    "google-chrome": CHROMIUM,
}
# The live view: x11vnc on loopback only, noVNC's page and WebSocket bridge (websockify) on a port
# the session's preview URLs reach (the control plane hands out a token for it).
VNC_PORT = 5900
VNC_WEB_PORT = 6080
NOVNC_DIR = "/usr/share/novnc"

# What a desktop process printed last, kept in memory: never a file that a chatty one fills.
LOG_TAIL_BYTES = 16 * 1024


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def validation(field, message):
    return ApiError(400, "VALIDATION_FAILED", f"{field}: {message}")


class Keysyms:
    """Key names checked against Xlib's own table: an unknown key is refused, not typed as nothing."""

    def __init__(self):
        name = ctypes.util.find_library("X11")
        self.lib = ctypes.CDLL(name) if name else None
        if self.lib:
            self.lib.XStringToKeysym.argtypes = [ctypes.c_char_p]
            self.lib.XStringToKeysym.restype = ctypes.c_ulong

    def known(self, name):
        if not self.lib:
            return True
        return self.lib.XStringToKeysym(name.encode()) != 0

    def chord(self, chord, field):
        """`ctrl+shift+t` → xdotool's `ctrl+shift+t`, each part a modifier or a keysym."""
        if not isinstance(chord, str) or not chord or len(chord) > 100:
            raise validation(field, "a key chord such as ctrl+c or Return")
        parts = []
        for part in chord.split("+"):
            name = KEY_ALIASES.get(part.lower(), part)
            if name.lower() in MODIFIERS:
                parts.append(name.lower())
            elif len(name) == 1 or self.known(name):
                parts.append(name)
            else:
                raise validation(field, f"unknown key {part!r} (X keysym names: Return, Escape, Tab, F5, a, ...)")
        return "+".join(parts)


class Display:
    """The X display and its window manager, started when first needed and again when they died."""

    def __init__(self):
        self.lock = threading.Lock()
        self.xvfb = None
        self.wm = None
        self.size = DEFAULT_SIZE
        self.dpi = DEFAULT_DPI
        self.restarts = 0
        self.last_exit = None
        self.env = dict(os.environ)
        self.logs = {}

    def configure(self, env):
        """The session's environment: its SPACE_DESKTOP_SIZE (WIDTHxHEIGHT) and SPACE_DESKTOP_DPI are the display's."""
        self.env = {**os.environ, **env}
        size = env.get("SPACE_DESKTOP_SIZE")
        if size:
            try:
                width, height = (int(v) for v in size.lower().split("x"))
                if 320 <= width <= 7680 and 240 <= height <= 4320:
                    self.size = (width, height)
            except ValueError:
                pass
        dpi = env.get("SPACE_DESKTOP_DPI")
        if dpi and dpi.isdigit() and 48 <= int(dpi) <= 480:
            self.dpi = int(dpi)

    def answering(self):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(X_SOCKET)
            return True
        except OSError:
            return False

    def ensure(self):
        """The display answers: one that died is started again with its window manager; one that
        answers without being ours (this server started again, it did not) is taken on as it is."""
        with self.lock:
            if self.xvfb is not None and self.xvfb.poll() is not None:
                self.last_exit = f"Xvfb exited with {self.xvfb.returncode}"
                self.xvfb = None
                self.restarts += 1
            if self.xvfb is None and not self.answering():
                self.start_x()
                if self.wm is not None and self.wm.poll() is None:
                    self.wm.kill()
                self.wm = self.spawn(["openbox"], "openbox")

    def start_x(self):
        if os.path.exists(X_SOCKET):
            os.unlink(X_SOCKET)
        lock = "/tmp/.X0-lock"
        if os.path.exists(lock):
            os.unlink(lock)
        width, height = self.size
        self.xvfb = self.spawn(
            ["Xvfb", DISPLAY, "-screen", "0", f"{width}x{height}x24", "-dpi", str(self.dpi), "-nolisten", "tcp", "-ac"],
            "xvfb",
        )
        deadline = time.monotonic() + 20
        while not self.answering():
            if self.xvfb.poll() is not None:
                raise ApiError(503, "DESKTOP_UNAVAILABLE", f"the X server exited at start ({self.xvfb.returncode}): {self.log_tail('xvfb')}")
            if time.monotonic() > deadline:
                raise ApiError(503, "DESKTOP_UNAVAILABLE", "the X server did not answer within 20 s")
            time.sleep(0.05)

    def spawn(self, argv, log_name):
        env = {**self.env, "DISPLAY": DISPLAY, "TMPDIR": DESKTOP_TMP}
        # A session of its own: signals meant for the caller's processes never reach the desktop.
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=env.get("HOME", "/root")
        )
        tail = self.logs[log_name] = bytearray()
        while len(self.logs) > 64:  # bounded however many programs are launched
            del self.logs[next(iter(self.logs))]
        threading.Thread(target=keep_tail, args=(process.stdout, tail), daemon=True).start()
        return process

    def log_tail(self, log_name):
        return bytes(self.logs.get(log_name, b""))[-1000:].decode(errors="replace").strip()

    def state(self):
        width, height = self.size
        return {
            "running": self.answering(),
            "width": width,
            "height": height,
            "dpi": self.dpi,
            "display": DISPLAY,
            "restarts": self.restarts,
            "lastExit": self.last_exit,
        }

    def xdotool(self, *args):
        done = subprocess.run(["xdotool", *args], env={**self.env, "DISPLAY": DISPLAY}, capture_output=True, timeout=30)
        if done.returncode != 0:
            raise ApiError(500, "DESKTOP_UNAVAILABLE", f"xdotool {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:500]}")
        return done.stdout.decode(errors="replace")


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_listening(port, process, name, display, timeout=15):
    """Returns once something accepts on 127.0.0.1:`port`; fails if `process` exits first or it takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            pass
        if process.poll() is not None:
            raise ApiError(503, "DESKTOP_UNAVAILABLE", f"{name} exited at start ({process.returncode}): {display.log_tail(name)}")
        if time.monotonic() > deadline:
            raise ApiError(503, "DESKTOP_UNAVAILABLE", f"{name} did not listen on port {port} within {timeout} s")
        time.sleep(0.05)


def keep_tail(stream, tail):
    """Reads a process's output to its end, keeping the last LOG_TAIL_BYTES in `tail`."""
    for chunk in iter(lambda: stream.read1(4096), b""):
        tail.extend(chunk)
        del tail[:-LOG_TAIL_BYTES]


def integer(body, field, low, high, default=None):
    value = body.get(field, default)
    if value is None:
        raise validation(field, "required")
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise validation(field, f"an integer from {low} to {high}")
    return value


class Desktop:
    def __init__(self):
        self.display = Display()
        self.keysyms = Keysyms()
        self.vnc_lock = threading.Lock()
        self.vnc_server = None
        self.vnc_view_only = True
        self.vnc_web = None

    def point(self, body, required=True):
        """`x`, `y` on the screen; None when both are left out and they may be."""
        if not required and body.get("x") is None and body.get("y") is None:
            return None
        width, height = self.display.size
        return integer(body, "x", 0, width - 1), integer(body, "y", 0, height - 1)

    def input(self, body):
        kind = body.get("type")
        d = self.display
        if kind == "move":
            x, y = self.point(body)
            d.xdotool("mousemove", "--sync", str(x), str(y))
        elif kind in ("click", "double_click", "down", "up"):
            button = BUTTONS.get(body.get("button", "left"))
            if button is None:
                raise validation("button", "left, middle or right")
            at = self.point(body, required=False)
            move = ["mousemove", "--sync", str(at[0]), str(at[1])] if at else []
            if kind == "click":
                d.xdotool(*move, "click", button) if move else d.xdotool("click", button)
            elif kind == "double_click":
                d.xdotool(*move, "click", "--repeat", "2", "--delay", "80", button) if move else d.xdotool("click", "--repeat", "2", "--delay", "80", button)
            else:
                action = "mousedown" if kind == "down" else "mouseup"
                d.xdotool(*move, action, button) if move else d.xdotool(action, button)
        elif kind == "drag":
            x, y = self.point(body)
            width, height = d.size
            to_x, to_y = integer(body, "toX", 0, width - 1), integer(body, "toY", 0, height - 1)
            d.xdotool("mousemove", "--sync", str(x), str(y), "mousedown", "1", "mousemove", "--sync", str(to_x), str(to_y), "mouseup", "1")
        elif kind == "scroll":
            direction = body.get("direction", "down")
            button = SCROLL_BUTTONS.get(direction)
            if button is None:
                raise validation("direction", "up, down, left or right")
            amount = integer(body, "amount", 1, 100, 1)
            at = self.point(body, required=False)
            move = ["mousemove", "--sync", str(at[0]), str(at[1])] if at else []
            d.xdotool(*move, "click", "--repeat", str(amount), "--delay", "20", button) if move else d.xdotool("click", "--repeat", str(amount), "--delay", "20", button)
        elif kind == "key":
            keys = body.get("keys")
            chords = keys if isinstance(keys, list) else [keys]
            if not chords or len(chords) > 50:
                raise validation("keys", "a key chord or a list of at most 50")
            d.xdotool("key", "--clearmodifiers", "--delay", "20", *[self.keysyms.chord(c, "keys") for c in chords])
        elif kind == "type":
            text = body.get("text")
            if not isinstance(text, str) or not text:
                raise validation("text", "a non-empty string")
            if len(text) > MAX_TEXT:
                raise validation("text", f"at most {MAX_TEXT} characters")
            delay = integer(body, "delayMs", 0, 1000, 12)
            d.xdotool("type", "--clearmodifiers", "--delay", str(delay), "--", text)
        else:
            raise validation("type", "move, click, double_click, down, up, drag, scroll, key or type")
        return {"ok": True}

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
        keep_in_memory(self.display.env.get("HOME", "/root"))
        process = self.display.spawn(argv, f"launch-{os.path.basename(argv[0])}")
        return {"pid": process.pid, "cmd": argv}

    def windows(self):
        d = self.display
        env = {**d.env, "DISPLAY": DISPLAY}
        listed = subprocess.run(["xprop", "-root", "_NET_CLIENT_LIST", "_NET_ACTIVE_WINDOW"], env=env, capture_output=True, timeout=10).stdout.decode()
        ids, active = [], None
        for line in listed.splitlines():
            values = line.split("#", 1)[1].replace(",", " ").split() if "#" in line else []
            if line.startswith("_NET_CLIENT_LIST("):
                ids = values
            elif line.startswith("_NET_ACTIVE_WINDOW(") and values:
                active = int(values[0], 16)
        windows = []
        for window in ids[:100]:
            props = subprocess.run(["xprop", "-id", window, "_NET_WM_NAME", "WM_CLASS"], env=env, capture_output=True, timeout=10).stdout.decode(errors="replace")
            title, app = "", ""
            for line in props.splitlines():
                if line.startswith("_NET_WM_NAME") and "=" in line:
                    title = parse_xprop_string(line.split("=", 1)[1])
                elif line.startswith("WM_CLASS") and "=" in line:
                    names = [parse_xprop_string(part) for part in line.split("=", 1)[1].split(",")]
                    app = names[-1] if names else ""
            geometry = {}
            try:
                shell = d.xdotool("getwindowgeometry", "--shell", str(int(window, 16)))
                geometry = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
            except ApiError:
                continue  # closed meanwhile
            windows.append(
                {
                    "id": str(int(window, 16)),
                    "title": title[:1000],
                    "app": app[:200],
                    "x": int(geometry.get("X", 0)),
                    "y": int(geometry.get("Y", 0)),
                    "width": int(geometry.get("WIDTH", 0)),
                    "height": int(geometry.get("HEIGHT", 0)),
                    "focused": active == int(window, 16),
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
        shell = self.display.xdotool("getmouselocation", "--shell")
        values = dict(line.split("=", 1) for line in shell.splitlines() if "=" in line)
        return {"x": int(values.get("X", 0)), "y": int(values.get("Y", 0))}


def parse_xprop_string(raw):
    raw = raw.strip()
    if raw.startswith('"') and raw.endswith('"'):
        return raw[1:-1].encode("latin-1", errors="replace").decode("unicode_escape", errors="replace").encode("latin-1", errors="replace").decode("utf-8", errors="replace")
    return raw


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "space-desktop-server"

    def log_message(self, format, *args):
        pass

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
                return self.reply(200, desktop.input(self.body()))
            if method == "POST" and path == "/launch":
                return self.reply(200, desktop.launch(self.body()))
            if method == "GET" and path == "/windows":
                return self.reply(200, desktop.windows())
            if method == "GET" and path == "/cursor":
                return self.reply(200, desktop.cursor())
            if method == "POST" and path == "/vnc":
                return self.reply(200, desktop.vnc(self.body()))
            raise ApiError(404, "ROUTE_NOT_FOUND", f"{method} {self.path[:200]} is not a desktop route")
        except ApiError as e:
            self.reply(e.status, {"error": {"code": e.code, "message": e.message}})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # our own bug: the caller gets it as INTERNAL, the server goes on
            self.reply(500, {"error": {"code": "INTERNAL", "message": f"{type(e).__name__}: {e}"[:2000]}})

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        if length > 256 * 1024:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", "request body too large")
        raw = self.rfile.read(length) if length else b"{}"
        try:
            value = json.loads(raw)
        except ValueError:
            raise ApiError(400, "INVALID_JSON", "the body is not JSON")
        if not isinstance(value, dict):
            raise ApiError(400, "VALIDATION_FAILED", "the body must be a JSON object")
        return value

    def reply(self, status, value):
        self.send_bytes(json.dumps(value).encode(), "application/json", status)

    def send_bytes(self, body, content_type, status=200):
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args()
    os.makedirs(args.run_dir, mode=0o700, exist_ok=True)
    os.makedirs(DESKTOP_TMP, exist_ok=True)
    os.chmod(DESKTOP_TMP, 0o1777)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = Server(args.socket, Handler)
    os.chmod(args.socket, 0o600)
    server.desktop = Desktop()
    # Started with the session's environment (the agent's): its display settings hold from the first call.
    server.desktop.display.configure(dict(os.environ))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"space-desktop-server ready on {args.socket}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
