"""The wire's shapes, as the API sends them (camelCase keys). A test holds each to the protocol's
JSON schema, so an SDK type cannot drift from the server's (as sdk-wire-types.ts does for TypeScript).
No `from __future__ import annotations` here: Python 3.11 then misses `NotRequired` in `__required_keys__`."""

from typing import Any, Literal, NotRequired, TypedDict


class SandboxRefData(TypedDict):
    id: str
    nodeId: str
    startedAt: str


class SandboxHistoryData(TypedDict):
    id: str
    nodeId: str
    startedAt: str
    endedAt: str | None
    endReason: str | None
    restoredFrom: str | None
    note: str | None


class SecretGrantData(TypedDict):
    """The secret `secret` under env var `name` (a plain name: the secret of that name)."""

    name: str
    secret: str


class SessionData(TypedDict):
    id: str
    tenantId: str
    template: str
    status: Literal["starting", "running", "idle", "stopped", "failed"]
    createdAt: str
    env: dict[str, str]
    resources: dict[str, Any]
    metadata: dict[str, str]
    secrets: list[str | SecretGrantData]
    egress: dict[str, Any]
    checkpointIntervalSec: int
    fullCheckpointIntervalSec: int
    idleTimeoutSec: int
    onResume: Literal["processes", "files"]
    codeCheckpointDelayMs: int
    expiresAt: str | None
    onTimeout: Literal["delete", "pause"]
    services: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    publicPorts: list[int]
    cwd: str
    sandbox: SandboxRefData | None
    nodeId: str | None
    parentCheckpointId: str | None
    lastCheckpointAt: str | None
    sandboxHistory: NotRequired[list[SandboxHistoryData]]
    checkpoints: NotRequired[list[dict[str, Any]]]


class ExecResultData(TypedDict):
    exitCode: int | None
    stdout: str
    stderr: str
    signal: NotRequired[str | None]
    timedOut: NotRequired[bool]
    truncated: NotRequired[bool]
    durationMs: NotRequired[int]


class FileEntry(TypedDict):
    path: str
    name: str
    type: str
    size: int
    mode: int
    mtime: str
    target: NotRequired[str]


class PathVersionData(TypedDict):
    """One version of a path, in one checkpoint of the session (`session.files.history`)."""

    checkpointId: str
    createdAt: str
    kind: str
    #: added, removed, modified, unchanged, absent, or unknown (the checkpoint's node did not answer).
    change: str
    type: str | None
    size: int | None
    mtime: str | None
    #: A regular file's sha256 (None for others, and for files over 256 MiB).
    sha256: str | None


class PathHistoryData(TypedDict):
    path: str
    versions: list[PathVersionData]


#: One file in two checkpoints (``space.checkpoints.diff_file``): sizes and sha256 of both, and a unified diff of text.
FileDiffData = TypedDict(
    "FileDiffData",
    {
        "path": str, "from": str, "to": str, "sizeBefore": int | None, "sizeAfter": int | None,
        "sha256Before": str | None, "sha256After": str | None, "text": bool, "unified": str | None,
    },
)


class PathRestoreData(TypedDict):
    """What `session.files.restore` did: the checkpoint taken first (restore it to undo) and what it wrote."""

    undoCheckpointId: str
    path: str
    files: int
    directories: int
    symlinks: int
    #: FIFOs, sockets and devices: never copied.
    skipped: list[str]


#: A path that differs between two checkpoints: added, removed, modified, renamed (``from`` names where it was) or mode.
#: The functional form: ``from`` is a keyword.
DiffEntryData = TypedDict(
    "DiffEntryData",
    {"path": str, "change": str, "type": str, "from": NotRequired[str], "sizeBefore": int | None, "sizeAfter": int | None},
)

#: One page of a diff, by path; ``next`` is the ``after`` of the next page (None on the last).
CheckpointDiffData = TypedDict("CheckpointDiffData", {"from": str, "to": str, "entries": list[DiffEntryData], "next": str | None})


class CheckpointData(TypedDict):
    id: str
    sessionId: str
    kind: Literal["fs", "full"]
    trigger: Literal["manual", "auto", "resume", "rescue"]
    createdAt: str
    sizeBytes: int | None
    pauseMs: int | None
    shippedAt: str | None
    volumes: list[dict[str, Any]]


class ProcessData(TypedDict):
    pid: int
    instance: NotRequired[str]
    cmd: str | list[str]
    startedAt: str
    running: bool
    exitCode: int | None
    pty: bool


class CodeContextData(TypedDict):
    id: str
    language: Literal["python", "javascript", "bash"]
    cwd: str
    createdAt: str
    executionCount: int
    state: Literal["idle", "busy", "dead"]


class CodeCellData(TypedDict):
    code: str
    startedAt: str
    executionCount: int | None
    events: list[dict[str, Any]]


#: The wire's shapes by the protocol schema each must match (the drift test's table).
WIRE_TYPES: dict[str, type] = {
    "SessionSchema": SessionData,
    "ExecResultSchema": ExecResultData,
    "FileStatSchema": FileEntry,
    "CheckpointSchema": CheckpointData,
    "PathVersionSchema": PathVersionData,
    "PathHistorySchema": PathHistoryData,
    "DiffEntrySchema": DiffEntryData,
    "CheckpointDiffSchema": CheckpointDiffData,
    "PathRestoreResultSchema": PathRestoreData,
    "FileDiffSchema": FileDiffData,
    "ProcessInfoSchema": ProcessData,
    "CodeContextSchema": CodeContextData,
    "CodeCellSchema": CodeCellData,
}
