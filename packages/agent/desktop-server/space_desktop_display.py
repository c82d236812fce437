"""The desktop's X display: Xvfb and its window manager, started when needed and again when they die,
and the processes started on it (their output kept in memory, bounded). Part of the desktop server
(space_desktop_server.py)."""

import os
import socket
import subprocess
import threading
import time

from space_unix_http import ApiError

DISPLAY = ":0"
X_SOCKET = "/tmp/.X11-unix/X0"
X_LOCK = "/tmp/.X0-lock"
# E2B Desktop's default too.
DEFAULT_SIZE = (1024, 768)
DEFAULT_DPI = 96
# Where what runs on the desktop keeps its temporary files: gVisor's own tmpfs under /dev, not the
# volume (the template's /etc/chromium.d/space-sandbox names the same for Chromium however started).
# Programs keep files there they unlink while open (Chromium's shared memory); on the volume (through
# the gofer) such files make a full checkpoint fail ("deleted and invalidated dentries can't be
# restored"), in the sandbox's own memory they are saved.
DESKTOP_TMP = "/dev/.space-desktop-tmp"
# What a desktop process printed last, kept in memory: never a file that a chatty one fills.
LOG_TAIL_BYTES = 16 * 1024


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
        # Programs launched on this display: a display already used is never started again for a size.
        self.launched = 0

    def configure(self, env):
        """
        The session's environment: its SPACE_DESKTOP_SIZE (WIDTHxHEIGHT) and SPACE_DESKTOP_DPI are the
        display's. A display started ahead (a pooled sandbox's) at another size, on which nothing was
        launched yet, is started again at this one.
        """
        self.env = {**os.environ, **env}
        before = (self.size, self.dpi)
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
        with self.lock:
            if (self.size, self.dpi) != before and self.xvfb is not None and self.xvfb.poll() is None and not self.launched:
                for process in (self.wm, self.xvfb):
                    if process is not None and process.poll() is None:
                        stop(process)
                self.xvfb = self.wm = None

    def answering(self):
        """Whether an X server answers on the display: at its abstract socket (the one an X server
        started with `-nolisten unix` has, as E2B Desktop's SDK starts it) or its file."""
        for address in ("\0" + X_SOCKET, X_SOCKET):
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1)
                    s.connect(address)
                return True
            except OSError:
                continue
        return False

    def starting_elsewhere(self):
        """Whether another X server holds the display's lock: a lock naming a live process, or one
        being written (X servers write the pid after making the file). Only a dead server's lock is not."""
        try:
            with open(X_LOCK) as lock:
                text = lock.read().strip()
        except OSError:
            return False
        try:
            os.kill(int(text), 0)
        except ValueError:
            return True
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True

    def ensure(self):
        """The display answers: one that died is started again with its window manager; one that
        answers without being ours (this server started again, it did not) is taken on as it is."""
        with self.lock:
            if self.xvfb is not None and self.xvfb.poll() is not None:
                self.last_exit = f"Xvfb exited with {self.xvfb.returncode}"
                self.xvfb = None
                self.restarts += 1
            if self.xvfb is None and not self.answering():
                # Never a second X server on the display: one another program starts is waited for.
                if self.starting_elsewhere() and wait_for(self.answering, 20):
                    return
                self.start_x()
                if self.wm is not None and self.wm.poll() is None:
                    self.wm.kill()
                self.wm = self.spawn(["xfwm4", "--compositor=off"], "xfwm4")

    def start_x(self):
        # What a dead server left (its lock names no running process: see starting_elsewhere).
        for left in (X_SOCKET, X_LOCK):
            if os.path.exists(left):
                os.unlink(left)
        width, height = self.size
        self.xvfb = self.spawn(
            ["Xvfb", DISPLAY, "-screen", "0", f"{width}x{height}x24", "-dpi", str(self.dpi), "-nolisten", "tcp", "-ac"],
            "xvfb",
        )
        if not wait_for(self.answering, 20, self.xvfb):
            if self.xvfb.poll() is not None:
                raise ApiError(503, "DESKTOP_UNAVAILABLE", f"the X server exited at start ({self.xvfb.returncode}): {self.log_tail('xvfb')}")
            raise ApiError(503, "DESKTOP_UNAVAILABLE", "the X server did not answer within 20 s")

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

    def x_tool(self, tool, *args, check=True, timeout=30):
        """A command-line X client (xdotool, xprop) on the display: its output; a failure is DESKTOP_UNAVAILABLE unless `check` is off."""
        done = subprocess.run([tool, *args], env={**self.env, "DISPLAY": DISPLAY}, capture_output=True, timeout=timeout)
        if check and done.returncode != 0:
            raise ApiError(500, "DESKTOP_UNAVAILABLE", f"{tool} {args[0]} failed: {done.stderr.decode(errors='replace').strip()[:500]}")
        return done.stdout.decode(errors="replace")

    def xdotool(self, *args):
        return self.x_tool("xdotool", *args)


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(ready, seconds, process=None):
    """Polls `ready` every 50 ms: True once it holds; False after `seconds`, or once `process` (when given) has exited."""
    deadline = time.monotonic() + seconds
    while not ready():
        if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_listening(port, process, name, display, timeout=15):
    """Returns once something accepts on 127.0.0.1:`port`; fails if `process` exits first or it takes too long."""
    if wait_for(lambda: accepts(port), timeout, process):
        return
    if process.poll() is not None:
        raise ApiError(503, "DESKTOP_UNAVAILABLE", f"{name} exited at start ({process.returncode}): {display.log_tail(name)}")
    raise ApiError(503, "DESKTOP_UNAVAILABLE", f"{name} did not listen on port {port} within {timeout} s")


def shell_values(output):
    """`NAME=value` lines (xdotool's --shell output) as a dict."""
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def keep_tail(stream, tail):
    """Reads a process's output to its end, keeping the last LOG_TAIL_BYTES in `tail`."""
    for chunk in iter(lambda: stream.read1(4096), b""):
        tail.extend(chunk)
        del tail[:-LOG_TAIL_BYTES]


