"""The code interpreter of a session: cells run in contexts (a kernel each, state kept between cells)."""

from __future__ import annotations

import builtins
import json
from urllib.parse import quote
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

from ._transport import Transport, present
from .errors import SpaceClientError
from .wire_types import CodeCellData, CodeContextData

CodeLanguage = Literal["python", "javascript", "bash"]

#: How much longer than the cell's own timeout the request may wait for a line: the sandbox may resume first.
_request_slack = 120.0


@dataclass
class CodeResult:
    """One display of a cell, or its value (`is_main_result`): the MIME bundle the kernel gave (`image/png` as base64)."""

    is_main_result: bool
    data: dict[str, Any]

    @property
    def text(self) -> str | None:
        value = self.data.get("text/plain")
        return value if isinstance(value, str) else None


@dataclass
class CodeError:
    name: str
    value: str
    traceback: list[str]


@dataclass
class Execution:
    """What a cell did, whole."""

    results: list[CodeResult] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    error: CodeError | None = None
    context_id: str | None = None
    execution_count: int | None = None
    duration_ms: int | None = None

    @property
    def text(self) -> str | None:
        """The cell's value as text (its main result's `text/plain`), if it had one."""
        return next((r.text for r in self.results if r.is_main_result), None)


def code_events(t: Transport, base: str, code: str, *, context: str | None = None, language: CodeLanguage | None = None,
                env: dict[str, str] | None = None, timeout: float | None = None) -> Iterator[dict[str, Any]]:
    """Starts a cell and yields its events (dicts of SPACE's code protocol) as they come; closing the iterator interrupts the cell."""
    body = present(code=code, contextId=context, language=language, env=env, timeoutMs=None if timeout is None else int(timeout * 1000))
    res = t.request("POST", f"{base}/code/run", json=body, timeout=(timeout or 300.0) + _request_slack)
    try:
        while line := res.readline():
            if line.strip():
                yield json.loads(line)
    except OSError as err:
        raise SpaceClientError("NETWORK", f"the cell's stream broke off: {err}") from err
    finally:
        # Abandoned early (the caller stopped iterating): the connection closes, which interrupts the cell.
        res.close()


def run_code(t: Transport, base: str, code: str, *, on_stdout: Callable[[str], None] | None = None,
             on_stderr: Callable[[str], None] | None = None, on_result: Callable[[CodeResult], None] | None = None,
             on_error: Callable[[CodeError], None] | None = None, **options: Any) -> Execution:
    execution = Execution()
    ended = False
    for event in code_events(t, base, code, **options):
        kind = event.get("type")
        if kind in ("stdout", "stderr"):
            getattr(execution, kind).append(event["text"])
            callback = on_stdout if kind == "stdout" else on_stderr
            if callback:
                callback(event["text"])
        elif kind == "result":
            result = CodeResult(bool(event["isMainResult"]), event["data"])
            execution.results.append(result)
            if on_result:
                on_result(result)
        elif kind == "error":
            execution.error = CodeError(event["name"], event["value"], list(event["traceback"]))
            if on_error:
                on_error(execution.error)
        elif kind == "end":
            execution.context_id, execution.execution_count, execution.duration_ms = event["contextId"], event["executionCount"], event["durationMs"]
            ended = True
    if not ended and execution.error is None:
        raise SpaceClientError("PROTOCOL", "the cell ended without its end event")
    return execution


class CodeContexts:
    """A session's code contexts: `session.code_contexts.create(language="python")`."""

    def __init__(self, t: Transport, base: str) -> None:
        self._t, self._base = t, f"{base}/code/contexts"

    def create(self, *, language: CodeLanguage | None = None, cwd: str | None = None, timeout: float | None = None) -> CodeContextData:
        return self._t.json("POST", self._base, json=present(language=language, cwd=cwd), timeout=timeout)

    def list(self, *, timeout: float | None = None) -> list[CodeContextData]:
        return self._t.json("GET", self._base, timeout=timeout)["contexts"]

    def get(self, context_id: str, *, timeout: float | None = None) -> CodeContextData:
        return self._t.json("GET", f"{self._base}/{quote(context_id, safe='')}", timeout=timeout)

    def restart(self, context_id: str, *, timeout: float | None = None) -> CodeContextData:
        """A new kernel in the context: its state is gone, its id stays."""
        return self._t.json("POST", f"{self._base}/{quote(context_id, safe='')}/restart", timeout=timeout)

    def history(self, context_id: str, *, timeout: float | None = None) -> builtins.list[CodeCellData]:
        return self._t.json("GET", f"{self._base}/{quote(context_id, safe='')}/history", timeout=timeout)["cells"]

    def delete(self, context_id: str, *, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"{self._base}/{quote(context_id, safe='')}", timeout=timeout)
