"""A session's handle: one method per session operation of the API, mirroring the TypeScript SDK's (snake_case)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator
from urllib.parse import quote, urlencode

from ._transport import CHUNK, Body, Transport, file_chunks, present
from .code_interpreter import CodeContexts, CodeError, CodeLanguage, CodeResult, Execution, code_events, run_code
from .errors import SandboxDied, SandboxStopped, SpaceApiError
from .exec_stream import ExecStream
from .file_watch import FileWatch
from .wire_types import CheckpointData, ExecResultData, FileEntry, PathHistoryData, PathRestoreData, ProcessData, SessionData

@dataclass
class ExecResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    signal: str | None = None

    @classmethod
    def of(cls, data: ExecResultData) -> ExecResult:
        return cls(data["exitCode"], data["stdout"], data["stderr"], bool(data.get("timedOut")), bool(data.get("truncated")), data.get("signal"))


def _retry_once_if_sandbox_lost(call: Callable[[], Any]) -> Any:
    """Reads and other calls that may be repeated wait out a sandbox dying (or stopped by the session's own restore or kill) under them."""
    try:
        return call()
    except (SandboxDied, SandboxStopped):
        return call()


def _path_query(path: str) -> str:
    return f"?path={quote(path, safe='')}"


def _read_whole(res: Any) -> bytes:
    """A download's body, whole (for `read`; `download` streams)."""
    try:
        return res.read()
    finally:
        res.close()


def _stream_into(res: Any, target: IO[bytes]) -> int:
    """A download's body into `target`, chunk by chunk; the bytes written."""
    written = 0
    try:
        while chunk := res.read(CHUNK):
            target.write(chunk)
            written += len(chunk)
    finally:
        res.close()
    return written


class SessionFiles:
    """Files of a session's sandbox. Relative paths are under /workspace."""

    def __init__(self, t: Transport, base: str) -> None:
        self._t, self._base = t, f"{base}/files"

    def watch(self, path: str) -> FileWatch:
        """Watches a file or a directory tree: `with session.files.watch("src") as w: for change in w: ...`; returns once the watch is in place."""
        return FileWatch(self._t.websocket(f"{self._base}/watch{_path_query(path)}"))

    def read(self, path: str, *, timeout: float | None = None) -> bytes:
        return _retry_once_if_sandbox_lost(lambda: _read_whole(self._t.request("GET", f"{self._base}{_path_query(path)}", timeout=timeout)))

    def write(self, path: str, data: str | bytes | IO[bytes], *, timeout: float | None = None) -> FileEntry:
        """Writes a file (parents made), atomically. A file object is streamed: nothing is held whole."""
        body: Body = data.encode() if isinstance(data, str) else data if isinstance(data, bytes) else file_chunks(data)
        return self._t.json("PUT", f"{self._base}{_path_query(path)}", body=body, headers={"content-type": "application/octet-stream"}, timeout=timeout)

    def upload(self, path: str, source: IO[bytes], *, timeout: float | None = None) -> FileEntry:
        """Streams an open binary file into a file in the sandbox (`write` with a file object)."""
        return self.write(path, source, timeout=timeout)

    def download(self, path: str, target: IO[bytes], *, timeout: float | None = None) -> int:
        """Streams a file into `target` (an open binary file); returns the bytes written."""
        return _stream_into(self._t.request("GET", f"{self._base}{_path_query(path)}", timeout=timeout), target)

    def list(self, path: str, *, timeout: float | None = None) -> list[FileEntry]:
        return _retry_once_if_sandbox_lost(lambda: self._t.json("GET", f"{self._base}/list{_path_query(path)}", timeout=timeout)["entries"])

    def stat(self, path: str, *, timeout: float | None = None) -> FileEntry:
        return _retry_once_if_sandbox_lost(lambda: self._t.json("GET", f"{self._base}/stat{_path_query(path)}", timeout=timeout))

    def history(self, path: str, *, timeout: float | None = None) -> PathHistoryData:
        """The path in each of the session's checkpoints, oldest first, with how it changed from the one before."""
        return self._t.json("GET", f"{self._base}/history{_path_query(path)}", timeout=timeout)

    def restore(self, checkpoint_id: str, path: str, *, to: str | None = None, timeout: float | None = None) -> PathRestoreData:
        """Puts `path` as it was in a checkpoint of the session's lineage back (at `to`, else the same path); restore `undoCheckpointId` to undo."""
        body = {"checkpointId": checkpoint_id, "path": path, **({"to": to} if to is not None else {})}
        return self._t.json("POST", f"{self._base}/restore", json=body, timeout=timeout)

    def mkdir(self, path: str, *, recursive: bool = True, timeout: float | None = None) -> None:
        self._t.json("POST", f"{self._base}/mkdir", json={"path": path, "recursive": recursive}, timeout=timeout)

    def move(self, source: str, target: str, *, overwrite: bool = False, timeout: float | None = None) -> None:
        self._t.json("POST", f"{self._base}/move", json={"from": source, "to": target, "overwrite": overwrite}, timeout=timeout)

    def remove(self, path: str, *, recursive: bool = False, timeout: float | None = None) -> None:
        self._t.json("DELETE", f"{self._base}{_path_query(path)}{'&recursive=true' if recursive else ''}", timeout=timeout)


class CheckpointFiles:
    """A checkpoint's files as they were, read where the checkpoint is: no sandbox starts. Read-only; a symlink resolves inside the checkpoint."""

    def __init__(self, t: Transport, checkpoint_id: str) -> None:
        self._t, self.checkpoint_id = t, checkpoint_id
        self._base = f"/v1/checkpoints/{quote(checkpoint_id, safe='')}/files"

    def read(self, path: str, *, timeout: float | None = None) -> bytes:
        return _read_whole(self._t.request("GET", f"{self._base}{_path_query(path)}", timeout=timeout))

    def download(self, path: str, target: IO[bytes], *, timeout: float | None = None) -> int:
        """Streams a file into `target` (an open binary file); returns the bytes written."""
        return _stream_into(self._t.request("GET", f"{self._base}{_path_query(path)}", timeout=timeout), target)

    def list(self, path: str, *, timeout: float | None = None) -> list[FileEntry]:
        return self._t.json("GET", f"{self._base}/list{_path_query(path)}", timeout=timeout)["entries"]

    def stat(self, path: str, *, timeout: float | None = None) -> FileEntry:
        return self._t.json("GET", f"{self._base}/stat{_path_query(path)}", timeout=timeout)


class SessionHandle:
    """A session by id, for calls that need nothing but the id (`space.sessions.handle(id)` makes one without a round trip)."""

    id: str
    files: SessionFiles
    #: The code interpreter's contexts (templates with one: `code-interpreter`).
    code_contexts: CodeContexts

    def __init__(self, t: Transport, session_id: str) -> None:
        self._t = t
        self.id = session_id
        self._base = f"/v1/sessions/{quote(session_id, safe='')}"
        self.files = SessionFiles(t, self._base)
        self.code_contexts = CodeContexts(t, self._base)

    def exec(self, cmd: str | list[str], *, cwd: str | None = None, env: dict[str, str] | None = None, stdin: str | None = None,
             command_timeout: float | None = None, timeout: float | None = None) -> ExecResult:
        """Runs a command to completion (a string runs under `sh -c`); `command_timeout` kills it past that many seconds."""
        return ExecResult.of(self._t.json("POST", f"{self._base}/exec", json=_exec_body(cmd, cwd, env, stdin, command_timeout), timeout=timeout))

    def start_background(self, cmd: str | list[str], *, cwd: str | None = None, env: dict[str, str] | None = None, timeout: float | None = None) -> int:
        """Starts a command that keeps running; returns its pid."""
        body = {**_exec_body(cmd, cwd, env, None, None), "background": True}
        return self._t.json("POST", f"{self._base}/exec", json=body, timeout=timeout)["pid"]

    def exec_stream(self, cmd: str | list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
                    command_timeout: float | None = None, reattach: bool = True) -> ExecStream:
        """Runs a command and streams its events: `for event in session.exec_stream("npm test")`; re-attaches after a dropped connection."""
        start = {"type": "start", **_exec_body(cmd, cwd, env, None, command_timeout)}
        return ExecStream(self._t.websocket, f"{self._base}/exec/stream", start, self._attach_path if reattach else None)

    def attach(self, pid: int, *, sandbox: str | None = None, instance: str | None = None, reattach: bool = True) -> ExecStream:
        """Re-attaches to a process by pid, its kept output replayed first; with `sandbox` and `instance` (from a stream's start), only to that same process."""
        binding = present(sandbox=sandbox, instance=instance)
        return ExecStream(self._t.websocket, self._attach_path(int(pid), 0, binding), None, self._attach_path if reattach else None)

    def pty(self, cmd: str | list[str] | None = None, *, cols: int = 80, rows: int = 24, env: dict[str, str] | None = None, cwd: str | None = None) -> ExecStream:
        """An interactive terminal: `write` keystrokes, read `stdout` events, `resize` it."""
        start = present(type="start", cols=cols, rows=rows, cmd=cmd, env=env, cwd=cwd)
        return ExecStream(self._t.websocket, f"{self._base}/pty", start, self._attach_path)

    def send_to_process(self, pid: int, *, stdin: str | bytes | None = None, eof: bool = False, resize: tuple[int, int] | None = None) -> None:
        """Sends stdin, its end, or a terminal size (cols, rows) to a running process without holding a stream to it (PROCESS_NOT_FOUND when none runs)."""
        ws = self._t.websocket(self._attach_path(int(pid), 2**53 - 1, {}))
        try:
            if stdin is not None:
                ws.send_text(json.dumps({"type": "stdin", "data": base64.b64encode(stdin.encode() if isinstance(stdin, str) else stdin).decode()}))
            if resize is not None:
                ws.send_text(json.dumps({"type": "resize", "cols": resize[0], "rows": resize[1]}))
            if eof:
                ws.send_text(json.dumps({"type": "stdin-eof"}))
            ws.close_write()
            # A refusal comes as an error message before the server closes.
            while (text := ws.receive_text()) is not None:
                message = json.loads(text)
                if message.get("type") == "error":
                    raise SpaceApiError(str(message.get("code", "INTERNAL")), str(message.get("message", "the process refused the input")))
        finally:
            ws.close()

    def _attach_path(self, pid: int, after: int, binding: dict[str, str]) -> str:
        return f"{self._base}/processes/{pid}/attach?{urlencode({'after': after, **binding})}"

    def processes(self, *, timeout: float | None = None) -> list[ProcessData]:
        return self.process_list(timeout=timeout)["processes"]

    def process_list(self, *, timeout: float | None = None) -> dict[str, Any]:
        """`processes()` and how many live processes run that the agent did not start (`untracked`)."""
        return _retry_once_if_sandbox_lost(lambda: self._t.json("GET", f"{self._base}/processes", timeout=timeout))

    def signal(self, pid: int, signal: str = "SIGTERM", *, timeout: float | None = None) -> None:
        self._t.json("POST", f"{self._base}/processes/{int(pid)}/signal", json={"signal": signal}, timeout=timeout)

    def run_code(self, code: str, *, context: str | None = None, language: CodeLanguage | None = None, env: dict[str, str] | None = None,
                 timeout: float | None = None, on_stdout: Callable[[str], None] | None = None, on_stderr: Callable[[str], None] | None = None,
                 on_result: Callable[[CodeResult], None] | None = None, on_error: Callable[[CodeError], None] | None = None) -> Execution:
        """Runs a cell in a code context (state kept between cells; by default the Python context): `session.run_code("6 * 7").text` is `"42"`."""
        return run_code(self._t, self._base, code, context=context, language=language, env=env, timeout=timeout,
                        on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result, on_error=on_error)

    def code_events(self, code: str, *, context: str | None = None, language: CodeLanguage | None = None, env: dict[str, str] | None = None,
                    timeout: float | None = None) -> Iterator[dict[str, Any]]:
        """`run_code`'s events one by one as they come; closing the iterator early interrupts the cell."""
        return code_events(self._t, self._base, code, context=context, language=language, env=env, timeout=timeout)

    def checkpoint(self, *, kind: str = "fs", timeout: float | None = None) -> CheckpointData:
        """`fs` (default) snapshots the files; `full` also memory and processes (FullCheckpointRefused with `details["fallbackCheckpointId"]` when it cannot be now)."""
        return self._t.json("POST", f"{self._base}/checkpoints", json={"kind": kind}, timeout=timeout)

    def checkpoints(self, *, timeout: float | None = None) -> list[CheckpointData]:
        return self._t.json("GET", f"{self._base}/checkpoints", timeout=timeout)["checkpoints"]

    def restore(self, checkpoint_id: str, *, restore_volumes: bool = False, timeout: float | None = None) -> Session:
        """Resets the session to a checkpoint of its lineage (its own, or one taken in a fork)."""
        return Session(self._t, self._t.json("POST", f"{self._base}/restore", json={"checkpointId": checkpoint_id, "restoreVolumes": restore_volumes}, timeout=timeout))

    def kill_sandbox(self, *, timeout: float | None = None) -> None:
        """Kills only the sandbox; the session resumes on its next call."""
        self._t.json("POST", f"{self._base}/sandbox/kill", timeout=timeout)

    def pause(self, *, timeout: float | None = None) -> CheckpointData:
        """Saves the sandbox in a checkpoint (full where it can) and stops it; the next call resumes the session."""
        return self._t.json("POST", f"{self._base}/pause", timeout=timeout)["checkpoint"]

    def set_timeout(self, timeout_sec: int, *, on_timeout: str | None = None, timeout: float | None = None) -> Session:
        """Deletes the session (or pauses it, `on_timeout="pause"`) `timeout_sec` from now; 0: never."""
        body: dict[str, Any] = {"timeoutSec": timeout_sec, **({"onTimeout": on_timeout} if on_timeout else {})}
        return Session(self._t, self._t.json("POST", f"{self._base}/timeout", json=body, timeout=timeout))

    def metrics(self, *, timeout: float | None = None) -> dict[str, Any]:
        """What the sandbox uses now (CPU, memory, disk); SESSION_NOT_RUNNING when no sandbox runs."""
        return self._t.json("GET", f"{self._base}/metrics", timeout=timeout)

    def ports(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """The TCP ports something listens on in the sandbox."""
        return self._t.json("GET", f"{self._base}/ports", timeout=timeout)["ports"]

    def preview(self, port: int, *, ttl_sec: int | None = None, timeout: float | None = None) -> dict[str, Any]:
        """A preview URL for a port that works without a key until it expires (default 1 hour)."""
        return self._t.json("POST", f"{self._base}/preview-tokens/{int(port)}", json={} if ttl_sec is None else {"ttlSec": ttl_sec}, timeout=timeout)

    def revoke_previews(self, port: int, *, timeout: float | None = None) -> int:
        return self._t.json("DELETE", f"{self._base}/preview-tokens/{int(port)}", timeout=timeout)["revoked"]

    def set_port_public(self, port: int, public: bool, *, timeout: float | None = None) -> Session:
        """Makes a port public (its preview URLs work for anyone), or private again."""
        return Session(self._t, self._t.json("PUT" if public else "DELETE", f"{self._base}/public-ports/{int(port)}", timeout=timeout))

    def set_service(self, name: str, cmd: str | list[str], *, port: int | None = None, cwd: str | None = None, env: dict[str, str] | None = None,
                    timeout: float | None = None) -> Session:
        """Declares (or replaces) a service: started in every new sandbox that did not restore the processes, and now in a running one."""
        spec = present(cmd=cmd, port=port, cwd=cwd, env=env)
        return Session(self._t, self._t.json("PUT", f"{self._base}/services/{quote(name, safe='')}", json=spec, timeout=timeout))

    def remove_service(self, name: str, *, timeout: float | None = None) -> Session:
        return Session(self._t, self._t.json("DELETE", f"{self._base}/services/{quote(name, safe='')}", timeout=timeout))

    def set_egress(self, policy: dict[str, Any], *, timeout: float | None = None) -> Session:
        """The session's egress policy, changed live: `{"mode": "deny-all"}`, `{"mode": "allow-list", "domains": [...]}`."""
        return Session(self._t, self._t.json("PUT", f"{self._base}/egress", json=policy, timeout=timeout))

    def revoke_secret(self, name: str, *, timeout: float | None = None) -> Session:
        """Takes the secret under env var `name` from this session only; its gateway injects it no more from the next request."""
        return Session(self._t, self._t.json("DELETE", f"{self._base}/secrets/{quote(name, safe='')}", timeout=timeout))

    def egress_log(self, *, limit: int = 100, timeout: float | None = None) -> list[dict[str, Any]]:
        """The newest `limit` requests the sandbox sent out, oldest first."""
        return self._t.json("GET", f"{self._base}/egress/audit?limit={int(limit)}", timeout=timeout)["entries"]

    def create_token(self, *, timeout: float | None = None) -> str:
        """A token that acts on this session only (its sandbox operations and reading it)."""
        return self._t.json("POST", f"{self._base}/tokens", timeout=timeout)["token"]

    def refresh(self, *, timeout: float | None = None) -> Session:
        """The session as it is now, with its sandbox history and checkpoints."""
        return Session(self._t, self._t.json("GET", self._base, timeout=timeout))

    def delete(self, *, timeout: float | None = None) -> None:
        self._t.json("DELETE", self._base, timeout=timeout)


class Session(SessionHandle):
    """A session: the durable thing, with its data as last fetched (`data`). Its sandbox may die; calls resume it."""

    data: SessionData

    def __init__(self, t: Transport, data: SessionData) -> None:
        super().__init__(t, data["id"])
        self.data = data

    def refresh(self, *, timeout: float | None = None) -> Session:
        self.data = self._t.json("GET", self._base, timeout=timeout)
        return self


def _exec_body(cmd: str | list[str], cwd: str | None, env: dict[str, str] | None, stdin: str | None, command_timeout: float | None) -> dict[str, Any]:
    return present(cmd=cmd, cwd=cwd, env=env, stdin=stdin, timeoutMs=None if command_timeout is None else int(command_timeout * 1000))
