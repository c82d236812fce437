"""A running command's events as an iterator, re-attaching after a dropped connection, as the TypeScript SDK's ExecStream."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ._websocket import WebSocket
from .errors import SpaceApiError, SpaceClientError

#: Re-attach attempts after a dropped stream, their pauses doubling from 0.2 s to at most 5 s.
_max_reconnects = 8


@dataclass
class ExecEvent:
    """`started` (pid), `stdout`/`stderr` (data), `exit` (exit_code, signal, timed_out), or `restored`
    (the process goes on in sandbox_id from a full checkpoint: its last repeated_bytes of output come again)."""

    type: str
    pid: int | None = None
    data: bytes = b""
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    sandbox_id: str | None = None
    previous_sandbox_id: str | None = None
    repeated_bytes: int = 0


class ExecStream:
    """Iterate for the events, ending after `exit`; `write`, `end`, `kill` and `resize` while it runs.

    When the connection drops before the exit, the stream re-attaches to the process by pid and asks
    for the output after the last byte it received, so none is lost or repeated. `close()` (or
    leaving a `with` block) closes the connection; the process keeps running (re-attach by pid).
    """

    #: The process's pid, once started.
    pid: int | None
    #: Times the stream re-attached after a dropped connection.
    reconnects: int

    def __init__(self, connect: Callable[[str], WebSocket], path: str, start: dict[str, Any] | None, attach_path: Callable[[int, int, dict[str, str]], str] | None) -> None:
        self._connect = connect
        self._attach_path = attach_path
        self._ws = connect(path)
        if start is not None:
            self._ws.send_text(json.dumps(start))
        self.pid = None
        self._binding: dict[str, str] = {}
        self._received = 0
        self._exited = False
        self._closed = False
        self.reconnects = 0

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[ExecEvent]:
        attempts = 0
        try:
            while not self._exited and not self._closed:
                text = self._ws.receive_text()
                if text is None:
                    if self._closed:
                        return
                    if self._attach_path is None or self.pid is None or attempts >= _max_reconnects:
                        raise SpaceClientError("NETWORK", "the stream closed before the command exited" + (f"; re-attach to pid {self.pid}" if self.pid else ""))
                    time.sleep(min(5.0, 0.2 * 2**attempts))
                    attempts += 1
                    self.reconnects += 1
                    self._ws = self._connect(self._attach_path(self.pid, self._received, self._binding))
                    continue
                attempts = 0
                event = self._event(json.loads(text))
                if event is not None:
                    yield event
        finally:
            self.close()

    def _event(self, m: dict[str, Any]) -> ExecEvent | None:
        kind = m.get("type")
        if kind == "error":
            raise SpaceApiError(str(m.get("code", "INTERNAL")), str(m.get("message", "stream error")))
        if kind == "started":
            first = self.pid is None
            previous = self._binding.get("sandbox")
            self.pid = int(m["pid"])
            self._binding = {k: v for k, v in {"sandbox": m.get("sandboxId") or previous, "instance": m.get("instance") or self._binding.get("instance")}.items() if v}
            if first:
                return ExecEvent("started", pid=self.pid)
            if m.get("sandboxId") and previous and m["sandboxId"] != previous:
                produced = m.get("produced")
                repeated = self._received - produced if produced is not None and produced < self._received else 0
                self._received -= repeated
                return ExecEvent("restored", sandbox_id=m["sandboxId"], previous_sandbox_id=previous, repeated_bytes=repeated)
            return None
        if kind in ("stdout", "stderr"):
            data = base64.b64decode(m.get("data", ""))
            offset = m.get("offset")
            if offset is not None:
                end = offset + len(data)
                if end <= self._received:
                    return None  # replayed, already delivered
                if offset < self._received:
                    data = data[self._received - offset :]
                self._received = end
            else:
                self._received += len(data)
            return ExecEvent(kind, data=data)
        if kind == "exit":
            self._exited = True
            return ExecEvent("exit", exit_code=m.get("exitCode"), signal=m.get("signal"), timed_out=bool(m.get("timedOut")))
        return None

    def write(self, data: str | bytes) -> None:
        self._send({"type": "stdin", "data": base64.b64encode(data.encode() if isinstance(data, str) else data).decode()})

    def end(self) -> None:
        """Ends the command's stdin."""
        self._send({"type": "stdin-eof"})

    def kill(self, signal: str = "SIGTERM") -> None:
        self._send({"type": "signal", "signal": signal})

    def resize(self, cols: int, rows: int) -> None:
        self._send({"type": "resize", "cols": cols, "rows": rows})

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ws.close()

    def _send(self, message: dict[str, Any]) -> None:
        self._ws.send_text(json.dumps(message))
