#!/usr/bin/env python3
"""SPACE's code interpreter, inside a sandbox: contexts (one kernel each) and cells.

The in-sandbox agent starts this server and is its only client: it listens on a Unix socket
(never TCP), so nothing outside reaches it but through the agent, and it never stands in the way
of a full checkpoint. Python contexts are IPython kernels reached over ZMQ's `ipc` transport
(Unix sockets too); JavaScript and bash contexts are a long-lived Node.js and bash. A cell answers a stream of SPACE's code
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
import select
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler

from space_code_cell import Cell, ClientGone
from space_unix_http import ApiError, JsonRequests, serve
from space_code_kernels import KERNELS

# Cells a context remembers (the console's notebook view), and the code each keeps: in the kernel
# server's memory, so a full checkpoint holds them with the kernel.
HISTORY_CELLS = 20
HISTORY_CODE_BYTES = 64 * 1024


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


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


class Handler(JsonRequests, BaseHTTPRequestHandler):
    server_version = "space-code-server"

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
        except ClientGone:
            pass
        except Exception as e:
            self.reply_error(e)

    def body(self):
        return super().body(self.server.limits["maxCodeBytes"] + 65536)

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
        cell = Cell(self.write_line, self.server.limits)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--limits", required=True, help="JSON: the protocol's code limits")
    parser.add_argument("--cwd", default="/workspace")
    args = parser.parse_args()
    limits = json.loads(args.limits)
    os.makedirs(args.run_dir, mode=0o700, exist_ok=True)
    contexts = Contexts(args.run_dir, limits, args.cwd if os.path.isdir(args.cwd) else "/")
    # The default Python context exists before the first cell asks for it.
    contexts.default_for("python")
    serve(args.socket, Handler, "space-code-server", contexts=contexts, limits=limits)


if __name__ == "__main__":
    main()
