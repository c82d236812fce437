"""SPACE's Python SDK: sessions whose files and processes outlive their sandboxes.

    from space import Space
    space = Space()                                   # SPACE_API_URL, SPACE_API_KEY
    session = space.sessions.create(template="base")
    print(session.exec("python3 -c 'print(6*7)'").stdout)
"""

from ._transport import RetryPolicy
from .asyncio_client import AsyncProxy, AsyncSpace
from .client import Checkpoints, Nodes, Secrets, Sessions, Space, Templates, Volumes
from .file_watch import FileChange, FileWatch
from .code_interpreter import CodeContexts, CodeError, CodeLanguage, CodeResult, Execution
from .errors import (
    CheckpointNotFound,
    CodeInterpreterUnavailable,
    ContextNotFound,
    FileNotFound,
    FullCheckpointRefused,
    PayloadTooLarge,
    QuotaExceeded,
    SandboxDied,
    SandboxStopped,
    SessionBusy,
    SessionNotFound,
    SpaceApiError,
    SpaceClientError,
    SpaceError,
    TooManyRequests,
    DeadlineExceeded,
    Unauthorized,
    ValidationFailed,
)
from .exec_stream import ExecEvent, ExecStream
from .session import CheckpointFiles, ExecResult, Session, SessionFiles, SessionHandle
from .wire_types import CheckpointData, CodeCellData, CodeContextData, ExecResultData, FileEntry, ProcessData, SecretGrantData, SessionData

__all__ = [
    "AsyncProxy",
    "AsyncSpace",
    "CheckpointData",
    "CheckpointFiles",
    "CheckpointNotFound",
    "Checkpoints",
    "CodeCellData",
    "CodeContextData",
    "CodeContexts",
    "CodeError",
    "CodeInterpreterUnavailable",
    "CodeLanguage",
    "CodeResult",
    "ContextNotFound",
    "ExecEvent",
    "ExecResult",
    "ExecStream",
    "ExecResultData",
    "Execution",
    "FileChange",
    "FileEntry",
    "FileWatch",
    "FileNotFound",
    "FullCheckpointRefused",
    "Nodes",
    "PayloadTooLarge",
    "ProcessData",
    "QuotaExceeded",
    "RetryPolicy",
    "SandboxDied",
    "SandboxStopped",
    "SecretGrantData",
    "Secrets",
    "Session",
    "SessionBusy",
    "SessionData",
    "SessionFiles",
    "SessionHandle",
    "SessionNotFound",
    "Sessions",
    "Space",
    "SpaceApiError",
    "SpaceClientError",
    "SpaceError",
    "Templates",
    "TooManyRequests",
    "DeadlineExceeded",
    "Unauthorized",
    "ValidationFailed",
    "Volumes",
]
