"""SPACE's errors: the API's by code (compare codes, or catch the subclasses), and the client's own."""

from __future__ import annotations

from typing import Any


class SpaceError(Exception):
    """Every error of the SDK: `code` (an API error code such as SESSION_NOT_FOUND, or a client one), `message`."""

    def __init__(self, code: str, message: str, status: int = 0, details: dict[str, Any] | None = None, request_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        #: The HTTP status the API answered with; 0 for the client's own errors.
        self.status = status
        #: Machine-readable facts, e.g. `fallbackCheckpointId` when a full checkpoint was refused.
        self.details: dict[str, Any] = details or {}
        #: Names the request in the server's log: quote it when reporting a 500.
        self.request_id = request_id


class SpaceApiError(SpaceError):
    """An error the API answered with (its code is one of docs/api.md's)."""


class SpaceClientError(SpaceError):
    """Raised here, never by the server: CONFIGURATION, TIMEOUT, NETWORK, PROTOCOL."""


def unreachable(url: str, err: OSError) -> SpaceClientError:
    """Nothing answered at `url` (calls and streams alike)."""
    return SpaceClientError("NETWORK", f"cannot reach SPACE at {url}: {err} (is \"space up\" running? is SPACE_API_URL right?)")


def tls_failed(url: str, err: OSError) -> SpaceClientError:
    """The TLS handshake with `url` failed, most often an untrusted certificate (calls and streams alike)."""
    return SpaceClientError("NETWORK", f"TLS to SPACE at {url} failed: {err} (pass tls= an ssl.SSLContext that trusts its certificate)")


class Unauthorized(SpaceApiError):
    pass


class ValidationFailed(SpaceApiError):
    pass


class SessionNotFound(SpaceApiError):
    pass


class CheckpointNotFound(SpaceApiError):
    pass


class ContextNotFound(SpaceApiError):
    pass


class FileNotFound(SpaceApiError):
    pass


class QuotaExceeded(SpaceApiError):
    pass


class SessionBusy(SpaceApiError):
    pass


class SandboxDied(SpaceApiError):
    pass


class SandboxStopped(SpaceApiError):
    pass


class FullCheckpointRefused(SpaceApiError):
    pass


class CodeInterpreterUnavailable(SpaceApiError):
    pass


class PayloadTooLarge(SpaceApiError):
    pass


class DeadlineExceeded(SpaceApiError):
    """The call waited for its session (a resume, a move) past its timeout and was dropped unrun: safe to send again."""


class IdempotencyKeyReused(SpaceApiError):
    """The idempotency key was used for another method or path: each call needs a key of its own."""


class TooManyRequests(SpaceApiError):
    """A per-tenant limit refused the call before anything was done; `retry_after` seconds, from the server."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


_by_code: dict[str, type[SpaceApiError]] = {
    "UNAUTHORIZED": Unauthorized,
    "VALIDATION_FAILED": ValidationFailed,
    "SESSION_NOT_FOUND": SessionNotFound,
    "CHECKPOINT_NOT_FOUND": CheckpointNotFound,
    "CONTEXT_NOT_FOUND": ContextNotFound,
    "FILE_NOT_FOUND": FileNotFound,
    "QUOTA_EXCEEDED": QuotaExceeded,
    "SESSION_BUSY": SessionBusy,
    "SANDBOX_DIED": SandboxDied,
    "SANDBOX_STOPPED": SandboxStopped,
    "FULL_CHECKPOINT_REFUSED": FullCheckpointRefused,
    "CODE_INTERPRETER_UNAVAILABLE": CodeInterpreterUnavailable,
    "PAYLOAD_TOO_LARGE": PayloadTooLarge,
    "TOO_MANY_REQUESTS": TooManyRequests,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "IDEMPOTENCY_KEY_REUSED": IdempotencyKeyReused,
}


def api_error(status: int, body: bytes, request_id: str | None, retry_after: str | None = None) -> SpaceApiError:
    """The API's `{error: {code, message, details, requestId}}` body as its class; HTTP_ERROR with a body excerpt when it is not one."""
    import json

    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error.get("message", error["code"]))
    except (ValueError, KeyError, TypeError):
        return SpaceApiError("HTTP_ERROR", f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}", status, {}, request_id)
    cls = _by_code.get(code, SpaceApiError)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    request_id = error.get("requestId") or request_id
    if cls is TooManyRequests:
        return TooManyRequests(code, message, status, details, request_id, retry_after=float(retry_after) if retry_after else None)
    return cls(code, message, status, details, request_id)
