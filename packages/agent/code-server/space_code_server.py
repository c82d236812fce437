#!/usr/bin/env python3
"""SPACE's code interpreter, inside a sandbox: contexts (one kernel each) and cells.

The in-sandbox agent starts this server and is its only client: it listens on a Unix socket
(never TCP), so nothing outside reaches it but through the agent, and it never stands in the way
of a full checkpoint. Python contexts are IPython kernels reached over ZMQ's `ipc` transport
(Unix sockets too); bash contexts are a long-lived bash. A cell answers a stream of SPACE's code
events, one JSON object per line (the protocol package's `CodeEventSchema`):

  stdout / stderr {text}     streamed while the cell runs, coalesced for up to 50 ms
  result {isMainResult, data} one per display; `data` holds the MIME bundle the kernel gave
  error {name, value, traceback}
  end {contextId, executionCount, durationMs}

The limits come from the agent (generated from the protocol): this server keeps to them so that
a well-behaved cell's output arrives whole or visibly cut, but the layers above bound it again,
since everything in the sandbox (this server included) may be hostile.
"""

import argparse
import collections
import json
import os
import queue
import re
import select
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STREAM_FLUSH_S = 0.05
INTERRUPT_GRACE_S = 3.0
# Cells a context remembers (the console's notebook view), and the output each keeps: in the
# kernel server's memory, so a full checkpoint holds them with the kernel.
HISTORY_CELLS = 20
HISTORY_CELL_BYTES = 512 * 1024
HISTORY_CODE_BYTES = 64 * 1024


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class ClientGone(Exception):
    """The caller went away: its cell is interrupted."""


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Cell:
    """One cell's output on its way to the caller, held to the per-event and per-cell caps."""

    def __init__(self, write, limits, gone):
        self.write, self.limits, self.gone = write, limits, gone
        self.kept, self.kept_bytes = [], 0
        self.sent = 0
        self.cut = False
        self.buffers = {"stdout": [], "stderr": []}
        self.buffered = 0

    def emit(self, event):
        line = json.dumps(event, ensure_ascii=True, separators=(",", ":")) + "\n"
        self.keep(event, len(line))
        self.write(line.encode("ascii"))

    def keep(self, event, size):
        """The cell's events for its history, up to HISTORY_CELL_BYTES; past it one notice (errors and the end always)."""
        if self.kept_bytes + size <= HISTORY_CELL_BYTES or event["type"] in ("error", "end"):
            self.kept.append(event)
            self.kept_bytes += size
        elif self.kept_bytes <= HISTORY_CELL_BYTES:
            self.kept.append({"type": "stderr", "text": "[space: the rest of this cell's output is not kept in its history]\n"})
            self.kept_bytes = HISTORY_CELL_BYTES + 1

    def stream(self, name, text):
        if self.cut or not text:
            return
        self.buffers[name].append(text)
        self.buffered += len(text)
        if self.buffered >= self.limits["maxCodeStreamChunkBytes"]:
            self.flush()

    def flush(self):
        for name, parts in self.buffers.items():
            if not parts:
                continue
            text = "".join(parts)
            parts.clear()
            chunk = self.limits["maxCodeStreamChunkBytes"]
            for start in range(0, len(text), chunk):
                if not self.count(min(chunk, len(text) - start)):
                    break
                self.emit({"type": name, "text": text[start : start + chunk]})
        self.buffered = 0

    def result(self, data, is_main):
        self.flush()
        if self.cut:
            return
        data = self.fit(data)
        size = sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in data.values())
        if self.count(size):
            self.emit({"type": "result", "isMainResult": is_main, "data": data})

    def fit(self, data):
        """A bundle whose entries pass the event cap loses them, with a note in its text/plain."""
        cap = self.limits["maxCodeEventBytes"] - 4096
        kept, dropped = {}, []
        for mime, value in data.items():
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
            if size > cap or sum(len(str(v)) for v in kept.values()) + size > cap:
                dropped.append(f"{mime} of {size} bytes")
            else:
                kept[mime] = value
        if dropped:
            note = f"[space: {', '.join(dropped)} dropped: a result holds at most {cap} bytes]"
            kept["text/plain"] = (str(kept.get("text/plain", "")) + "\n" + note).strip()
        return kept

    def error(self, name, value, traceback):
        self.flush()
        lines = [ANSI_ESCAPE.sub("", line)[:16384] for line in traceback[:200]]
        self.emit({"type": "error", "name": str(name)[:1024], "value": str(value)[:16384], "traceback": lines})

    def end(self, context_id, count, started):
        self.flush()
        self.emit({"type": "end", "contextId": context_id, "executionCount": count, "durationMs": int((time.monotonic() - started) * 1000)})

    def count(self, size):
        """Whether `size` more bytes fit in the cell's output; past the cap, one notice and nothing more."""
        if self.sent + size <= self.limits["maxCellOutputBytes"]:
            self.sent += size
            return True
        self.cut = True
        for parts in self.buffers.values():
            parts.clear()
        self.emit({"type": "stderr", "text": f"\n[space: this cell's output passed {self.limits['maxCellOutputBytes']} bytes; the rest is not sent]\n"})
        return False


class PythonKernel:
    """An IPython kernel on ZMQ's ipc transport, with a blocking client of it."""

    language = "python"

    def __init__(self, context_id, cwd, run_dir):
        from jupyter_client import KernelManager

        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(run_dir, context_id))
        self.manager.connection_file = os.path.join(run_dir, f"{context_id}.json")
        env = dict(os.environ)
        # Charts as images in the cell's results (IPython's inline backend), not the template's Agg of scripts.
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        self.manager.start_kernel(cwd=cwd, env=env)
        self.client = self.manager.blocking_client()
        self.client.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=True)
        self.client.wait_for_ready(timeout=120)

    def alive(self):
        return self.manager.is_alive()

    def exit_code(self):
        process = getattr(self.manager, "provisioner", None)
        process = getattr(process, "process", None)
        return getattr(process, "returncode", None)

    def shutdown(self):
        try:
            self.client.stop_channels()
        finally:
            self.manager.shutdown_kernel(now=True)

    def interrupt(self):
        self.manager.interrupt_kernel()

    def run(self, code, env, cell, should_stop, deadline):
        """Runs `code`, emitting its output into `cell`; returns the execution count, or None when the kernel died."""
        if env:
            self.quiet("import os as __space_os\n__space_saved_env = {k: __space_os.environ.get(k) for k in %r}\n__space_os.environ.update(%r)" % (list(env), env))
        try:
            return self.execute(code, cell, should_stop, deadline)
        finally:
            if env and self.alive():
                self.quiet("for __k, __v in __space_saved_env.items():\n    (__space_os.environ.pop(__k, None) if __v is None else __space_os.environ.__setitem__(__k, __v))")

    def set_session(self, env, cwd):
        self.quiet("import os as __space_os\n__space_os.environ.update(%r)\n__space_os.chdir(%r)" % (dict(env), cwd))

    def quiet(self, code):
        msg_id = self.client.execute(code, silent=True, store_history=False)
        self.wait_idle(msg_id, time.monotonic() + 10)

    def wait_idle(self, msg_id, until):
        while time.monotonic() < until:
            try:
                msg = self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                if not self.alive():
                    return False
                continue
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return True
        return False

    def execute(self, code, cell, should_stop, deadline):
        msg_id = self.client.execute(code, store_history=True, allow_stdin=False, stop_on_error=True)
        count = None
        while True:
            stop = should_stop()
            if stop or time.monotonic() > deadline:
                cell.flush()
                self.interrupt()
                if not self.wait_idle(msg_id, time.monotonic() + INTERRUPT_GRACE_S):
                    self.manager.restart_kernel(now=True)
                    self.client.wait_for_ready(timeout=120)
                    cell.error("KernelRestarted", "the cell did not stop on an interrupt; the kernel was restarted and its state is lost", [])
                if stop:
                    raise ClientGone()
                cell.error("TimeoutError", "the cell ran past its timeout and was interrupted", [])
                return count
            try:
                msg = self.client.get_iopub_msg(timeout=STREAM_FLUSH_S)
            except queue.Empty:
                cell.flush()
                if not self.alive():
                    return None
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                cell.stream("stderr" if content.get("name") == "stderr" else "stdout", content.get("text", ""))
            elif kind in ("execute_result", "display_data"):
                cell.result(content.get("data", {}), kind == "execute_result")
            elif kind == "error":
                cell.error(content.get("ename", "Error"), content.get("evalue", ""), content.get("traceback", []))
            elif kind == "execute_input":
                count = content.get("execution_count", count)
            elif kind == "status" and content.get("execution_state") == "idle":
                return count


class ChildKernel:
    """A kernel that is one child process (and its group), talked to over its stdin and stdout: `argv`, started in the context's directory."""

    argv = []

    def __init__(self, context_id, cwd, run_dir):
        self.count = 0
        self.cwd = cwd
        self.start()

    def start(self):
        self.process = subprocess.Popen(self.argv, cwd=self.cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)

    def alive(self):
        return self.process.poll() is None

    def exit_code(self):
        return self.process.poll()

    def shutdown(self):
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def interrupt(self):
        os.killpg(self.process.pid, signal.SIGINT)


class BashKernel(ChildKernel):
    """A long-lived bash: variables, functions and the working directory carry over between cells."""

    language = "bash"
    argv = ["bash", "--noprofile", "--norc"]

    def set_session(self, env, cwd):
        self.cwd = cwd
        exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in env.items())
        self.process.stdin.write(f"{exports}cd {shell_quote(cwd)}\n".encode())
        self.process.stdin.flush()

    def run(self, code, env, cell, should_stop, deadline):
        marker = f"__space_end_{uuid.uuid4().hex}"
        exports = "".join(f"export {k}={shell_quote(v)}\n" for k, v in (env or {}).items())
        script = f"{exports}{code}\n__space_status=$?; printf '\\n{marker} %d\\n' $__space_status; printf '\\n{marker}\\n' >&2\n"
        self.process.stdin.write(script.encode())
        self.process.stdin.flush()
        pending = {self.process.stdout.fileno(): "stdout", self.process.stderr.fileno(): "stderr"}
        tails = {"stdout": b"", "stderr": b""}
        status = None
        while pending:
            if should_stop() or time.monotonic() > deadline:
                # A non-interactive bash ends with its interrupted command: it is started again.
                self.shutdown()
                self.start()
                cell.error("KernelRestarted", "the cell was interrupted; bash was started again and its state is lost", [])
                if should_stop():
                    raise ClientGone()
                return None
            ready, _, _ = select.select(list(pending), [], [], STREAM_FLUSH_S)
            if not ready:
                cell.flush()
                if not self.alive():
                    return None
                continue
            for fd in ready:
                name = pending[fd]
                chunk = os.read(fd, 65536)
                if not chunk:
                    del pending[fd]
                    continue
                data = tails[name] + chunk
                end = data.find(f"\n{marker}".encode())
                if end >= 0:
                    rest = data[end + len(marker) + 1 :]
                    data = data[:end]
                    del pending[fd]
                    if name == "stdout":
                        status = int((rest.split(b"\n", 2)[0] or b"0").strip() or 0)
                    cell.stream(name, data.decode("utf-8", "replace"))
                else:
                    # Keep the bytes a marker could start with for the next read.
                    keep = len(marker) + 1
                    cell.stream(name, data[:-keep].decode("utf-8", "replace") if len(data) > keep else "")
                    tails[name] = data[-keep:] if len(data) > keep else data
        self.count += 1
        if status:
            cell.error("ExitStatus", str(status), [f"the last command exited with status {status}"])
        return self.count


class JavaScriptKernel(ChildKernel):
    """A long-lived Node.js (space-js-kernel.js, beside this file): its global scope carries over between cells."""

    language = "javascript"
    argv = ["node", os.path.join(os.path.dirname(os.path.abspath(__file__)), "space-js-kernel.js")]

    def start(self):
        super().start()
        self.lines = b""
        ready, _, _ = select.select([self.process.stdout], [], [], 60)
        if not ready or b"ready" not in os.read(self.process.stdout.fileno(), 65536):
            self.shutdown()
            raise ApiError(503, "CODE_INTERPRETER_UNAVAILABLE", "the JavaScript context did not start (is node installed in the template?)")


    def set_session(self, env, cwd):
        exports = "".join(f"process.env[{json.dumps(str(k))}] = {json.dumps(str(v))};" for k, v in env.items())
        self.process.stdin.write((json.dumps({"code": f"{exports} process.chdir({json.dumps(cwd)}); undefined"}) + "\n").encode())
        self.process.stdin.flush()
        self.read_until_done(Cell(lambda _: None, {"maxCellOutputBytes": 1 << 20, "maxCodeStreamChunkBytes": 65536, "maxCodeEventBytes": 1 << 20}, lambda: False), time.monotonic() + 10)

    def run(self, code, env, cell, should_stop, deadline):
        if env:
            code = "".join(f"process.env[{json.dumps(str(k))}] = {json.dumps(str(v))};\n" for k, v in env.items()) + code
        self.process.stdin.write((json.dumps({"code": code}) + "\n").encode())
        self.process.stdin.flush()
        interrupted_at = None
        while True:
            stop = should_stop()
            if (stop or time.monotonic() > deadline) and interrupted_at is None:
                cell.flush()
                self.interrupt()
                interrupted_at = time.monotonic()
            if interrupted_at is not None and time.monotonic() - interrupted_at > INTERRUPT_GRACE_S:
                self.shutdown()
                self.start()
                cell.error("KernelRestarted", "the cell did not stop on an interrupt; Node.js was started again and its state is lost", [])
                if stop:
                    raise ClientGone()
                return None
            done = self.read_until_done(cell, time.monotonic() + STREAM_FLUSH_S, drop_interrupt=interrupted_at is not None)
            if done:
                if interrupted_at is not None and not should_stop():
                    cell.error("TimeoutError", "the cell ran past its timeout and was interrupted", [])
                if should_stop():
                    raise ClientGone()
                self.count += 1
                return self.count
            cell.flush()
            if not self.alive():
                return None

    def read_until_done(self, cell, until, drop_interrupt=False):
        """Relays the kernel's events into `cell` until `until`; True once the cell's `done` came."""
        streams = {self.process.stdout.fileno(): "stdout", self.process.stderr.fileno(): "stderr"}
        while time.monotonic() < until:
            ready, _, _ = select.select(list(streams), [], [], max(0, until - time.monotonic()))
            if not ready:
                return False
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return False
                if streams[fd] == "stderr":
                    # Node's own messages (a crash): shown as the cell's stderr.
                    cell.stream("stderr", chunk.decode("utf-8", "replace"))
                    continue
                self.lines += chunk
                while b"\n" in self.lines:
                    line, self.lines = self.lines.split(b"\n", 1)
                    event = json.loads(line)
                    kind = event.get("type")
                    if kind == "done":
                        return True
                    if kind in ("stdout", "stderr"):
                        cell.stream(kind, event.get("text", ""))
                    elif kind == "result":
                        cell.result(event.get("data", {}), True)
                    elif kind == "error" and not (drop_interrupt and event.get("name") == "KeyboardInterrupt"):
                        cell.error(event.get("name", "Error"), event.get("value", ""), event.get("traceback", []))
        return False


def shell_quote(value):
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


KERNELS = {"python": PythonKernel, "bash": BashKernel, "javascript": JavaScriptKernel}


class Context:
    def __init__(self, context_id, language, cwd, run_dir):
        self.id, self.language, self.cwd, self.run_dir = context_id, language, cwd, run_dir
        self.created_at = now_iso()
        self.execution_count = 0
        self.history = collections.deque(maxlen=HISTORY_CELLS)
        self.lock = threading.Lock()
        self.busy = False
        self.kernel = KERNELS[language](context_id, cwd, run_dir)

    def view(self):
        state = "busy" if self.busy else ("idle" if self.kernel.alive() else "dead")
        return {"id": self.id, "language": self.language, "cwd": self.cwd, "createdAt": self.created_at, "executionCount": self.execution_count, "state": state}

    def restart(self):
        self.kernel.shutdown()
        self.kernel = KERNELS[self.language](self.id, self.cwd, self.run_dir)
        self.execution_count = 0


class Contexts:
    def __init__(self, run_dir, limits, default_cwd):
        self.run_dir, self.limits, self.default_cwd = run_dir, limits, default_cwd
        self.items = {}
        self.lock = threading.Lock()

    def create(self, language, cwd, context_id=None):
        if language not in KERNELS:
            raise ApiError(400, "VALIDATION_FAILED", f"unsupported language {language!r}; supported: {', '.join(sorted(KERNELS))}")
        cwd = cwd or self.default_cwd
        if not os.path.isdir(cwd):
            raise ApiError(400, "VALIDATION_FAILED", f"cwd {cwd!r} is not a directory in the sandbox")
        with self.lock:
            if len(self.items) >= self.limits["maxCodeContexts"]:
                raise ApiError(409, "RESOURCE_EXHAUSTED", f"a sandbox holds at most {self.limits['maxCodeContexts']} contexts; delete one first")
            context_id = context_id or f"ctx_{uuid.uuid4().hex[:12]}"
            self.items.setdefault(context_id, None)  # reserved while its kernel starts
        try:
            context = Context(context_id, language, cwd, self.run_dir)
        except Exception:
            with self.lock:
                self.items.pop(context_id, None)
            raise
        with self.lock:
            self.items[context_id] = context
        return context

    def get(self, context_id):
        context = self.items.get(context_id)
        if context is None:
            raise ApiError(404, "CONTEXT_NOT_FOUND", f"no context {context_id!r} in this sandbox")
        return context

    def default_for(self, language):
        """The default context of a language: `python` (made at start), `bash` or `javascript`, made on first use."""
        with self.lock:
            found = self.items.get(language)
        return found or self.create(language, None, context_id=language)

    def delete(self, context_id):
        context = self.get(context_id)
        with self.lock:
            self.items.pop(context_id, None)
        context.kernel.shutdown()

    def set_session(self, env, cwd):
        """A new session claimed this sandbox: its environment and working directory, for running kernels and new ones."""
        os.environ.update({str(k): str(v) for k, v in env.items()})
        if cwd and os.path.isdir(cwd):
            self.default_cwd = cwd
        for context in [c for c in list(self.items.values()) if c is not None]:
            with context.lock:
                context.kernel.set_session(env, self.default_cwd)
                context.cwd = self.default_cwd

    def views(self):
        return [c.view() for c in list(self.items.values()) if c is not None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server_version = "space-code-server"

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        contexts = self.server.contexts
        try:
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if method == "POST" and parts == ["run"]:
                return self.run_cell(self.body())
            if method == "POST" and parts == ["session"]:
                body = self.body()
                contexts.set_session(body.get("env") or {}, body.get("cwd") or "")
                return self.reply(200, {"ok": True})
            if method == "GET" and parts == ["health"]:
                return self.reply(200, {"ok": True, "contexts": len(contexts.views())})
            if parts[:1] == ["contexts"]:
                if len(parts) == 1 and method == "GET":
                    return self.reply(200, {"contexts": contexts.views()})
                if len(parts) == 1 and method == "POST":
                    body = self.body()
                    return self.reply(200, contexts.create(body.get("language", "python"), body.get("cwd")).view())
                if len(parts) == 2 and method == "GET":
                    return self.reply(200, contexts.get(parts[1]).view())
                if len(parts) == 3 and parts[2] == "history" and method == "GET":
                    return self.reply(200, {"cells": list(contexts.get(parts[1]).history)})
                if len(parts) == 2 and method == "DELETE":
                    contexts.delete(parts[1])
                    return self.reply(200, {"ok": True})
                if len(parts) == 3 and parts[2] == "restart" and method == "POST":
                    context = contexts.get(parts[1])
                    with context.lock:
                        context.restart()
                    return self.reply(200, context.view())
            raise ApiError(404, "ROUTE_NOT_FOUND", f"{method} {self.path[:200]} is not a code interpreter route")
        except ApiError as e:
            self.reply(e.status, {"error": {"code": e.code, "message": e.message}})
        except ClientGone:
            pass
        except Exception as e:  # our own bug: the caller gets it as INTERNAL, the server goes on
            self.reply(500, {"error": {"code": "INTERNAL", "message": f"{type(e).__name__}: {e}"[:2000]}})

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        if length > self.server.limits["maxCodeBytes"] + 65536:
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
        try:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def run_cell(self, body):
        contexts = self.server.contexts
        code = body.get("code")
        if not isinstance(code, str):
            raise ApiError(400, "VALIDATION_FAILED", "code must be a string")
        if len(code.encode()) > self.server.limits["maxCodeBytes"]:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", f"code is larger than {self.server.limits['maxCodeBytes']} bytes")
        context_id = body.get("contextId")
        context = contexts.get(context_id) if context_id else contexts.default_for(body.get("language") or "python")
        if body.get("language") and context_id and body["language"] != context.language:
            raise ApiError(400, "VALIDATION_FAILED", f"context {context.id} runs {context.language}, not {body['language']}")
        timeout_s = min(float(body.get("timeoutMs") or 300000), 24 * 3600 * 1000) / 1000
        if not context.lock.acquire(timeout=timeout_s):
            raise ApiError(409, "SESSION_BUSY", f"context {context.id} is still running another cell")
        cell = Cell(self.write_line, self.server.limits, self.gone)
        started = time.monotonic()
        record = {"code": code[:HISTORY_CODE_BYTES], "startedAt": now_iso(), "executionCount": None, "events": cell.kept}
        context.history.append(record)
        context.busy = True
        try:
            self.send_response(200)
            self.send_header("content-type", "application/x-ndjson")
            self.end_headers()
            self.wfile.flush()
            if not context.kernel.alive():
                code_before = context.kernel.exit_code()
                context.restart()
                cell.stream("stderr", f"[space: the kernel of {context.id} had exited ({code_before}); a new one was started, its state is lost]\n")
            count = context.kernel.run(code, body.get("env") or {}, cell, self.gone, started + timeout_s)
            if count is None and not context.kernel.alive():
                cell.error("KernelDied", f"the kernel of {context.id} exited during the cell (exit code {context.kernel.exit_code()}); the next cell starts a new one", [])
            elif count is not None:
                context.execution_count = count
            cell.end(context.id, context.execution_count, started)
        except (BrokenPipeError, ConnectionResetError, ClientGone):
            cell.kept.append({"type": "error", "name": "Interrupted", "value": "the caller left; the cell was interrupted", "traceback": []})
            raise ClientGone()
        finally:
            record["executionCount"] = context.execution_count
            context.busy = False
            context.lock.release()

    def write_line(self, data):
        self.wfile.write(data)
        self.wfile.flush()

    def gone(self):
        """Whether the caller closed its end: readable with nothing to read."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _ = super().get_request()
        return request, ("unix", 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--limits", required=True, help="JSON: the protocol's code limits")
    parser.add_argument("--cwd", default="/workspace")
    args = parser.parse_args()
    limits = json.loads(args.limits)
    os.makedirs(args.run_dir, mode=0o700, exist_ok=True)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    contexts = Contexts(args.run_dir, limits, args.cwd if os.path.isdir(args.cwd) else "/")
    # The default Python context exists before the first cell asks for it.
    contexts.default_for("python")
    server = Server(args.socket, Handler)
    os.chmod(args.socket, 0o600)
    server.contexts, server.limits = contexts, limits
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"space-code-server ready on {args.socket}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
