"""Changes under a path in the sandbox, as an iterator, until closed."""

from __future__ import annotations

import json
from typing import Iterator, TypedDict

from ._websocket import WebSocket
from .errors import SpaceApiError, SpaceClientError


class FileChange(TypedDict):
    """`rename` (created, deleted or moved) or `change` (written), and the path."""

    event: str
    path: str


class FileWatch:
    """Made once the watch is in place (changes before it are not reported); iterate for the changes, `close()` (or a `with` block) to end it."""

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        self._closed = False
        first = self._message()
        if first is None or first.get("type") != "ready":
            ws.close()
            raise SpaceClientError("PROTOCOL", f"the watch did not start: {first!r}")

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[FileChange]:
        try:
            while not self._closed and (m := self._message()) is not None:
                if m.get("type") == "change" and isinstance(m.get("path"), str):
                    yield {"event": str(m.get("event")), "path": m["path"]}
        finally:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._ws.close()

    def _message(self) -> dict | None:
        text = self._ws.receive_text()
        if text is None:
            return None
        try:
            m = json.loads(text)
        except ValueError as err:
            raise SpaceClientError("PROTOCOL", "the server sent a message that is not JSON") from err
        if m.get("type") == "error":
            raise SpaceApiError(str(m.get("code", "INTERNAL")), str(m.get("message", "watch error")))
        return m
