"""HTTP to SPACE's API: the key, fail-over between control planes, timeouts, errors by code,
waiting out a `429` by its `Retry-After` (a refusal before anything was done, so safe to repeat),
and an idempotency key on every call that changes something, so that a call whose connection broke
after it was sent is sent again safely: the server answers a retry with the first outcome."""

from __future__ import annotations

import http.client
import json as jsonlib
import ssl
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import IO, Any, Iterable, Iterator

from ._websocket import WebSocket
from .errors import SpaceClientError, TooManyRequests, api_error, tls_failed, unreachable

#: Where each call names its timeout to the server, which drops it unrun if it is still waiting for
#: its session (a resume, a move) when the caller has given up (the protocol's header of that name).
CALL_TIMEOUT_HEADER = "x-space-timeout-ms"
#: Where each call that changes something names its idempotency key (the protocol's header of that name).
IDEMPOTENCY_KEY_HEADER = "idempotency-key"
#: The longest timeout the server takes from the header (a day); a longer one is not sent.
_MAX_NAMED_TIMEOUT = 86_400.0

#: Errors that mean "nothing listens there": the next control plane is tried.
_not_connected = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError)


@dataclass(frozen=True)
class RetryPolicy:
    """How a refused `429` is waited out: at most `attempts` retries, each waiting its `Retry-After` (at most `max_wait` seconds); `attempts=0` turns it off."""

    attempts: int = 20
    max_wait: float = 10.0


Body = bytes | IO[bytes] | Iterable[bytes] | None


#: Bytes read or written at a time when a file is streamed.
CHUNK = 1024 * 1024


def file_chunks(source: IO[bytes]) -> Iterator[bytes]:
    """A file object as a streamed body: read a chunk at a time, never whole."""
    while chunk := source.read(CHUNK):
        yield chunk


def present(**fields: Any) -> dict[str, Any]:
    """A request body of the fields given (not None), in the API's names."""
    return {name: value for name, value in fields.items() if value is not None}


class Transport:
    def __init__(self, api_urls: list[str], api_key: str, timeout: float, retry: RetryPolicy, tls: ssl.SSLContext | None) -> None:
        self.api_urls = api_urls
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry
        self.tls = tls
        self._current = 0

    @property
    def api_url(self) -> str:
        return self.api_urls[self._current]

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: Body = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> http.client.HTTPResponse:
        """Sends a call and returns its response (2xx; anything else raises its SpaceError). Read it, then `close()` it."""
        wait = timeout or self.timeout
        sent_headers = {"authorization": f"Bearer {self.api_key}", **(headers or {})}
        if wait <= _MAX_NAMED_TIMEOUT:
            sent_headers[CALL_TIMEOUT_HEADER] = str(max(1, round(wait * 1000)))
        if method != "GET":
            # One key for the call, the same on each of its retries.
            sent_headers.setdefault(IDEMPOTENCY_KEY_HEADER, str(uuid.uuid4()))
        if json is not None:
            body = jsonlib.dumps(json).encode()
            sent_headers["content-type"] = "application/json"
        replayable = body is None or isinstance(body, bytes)
        retries = 0
        failovers = 0
        resent = False
        while True:
            url = urllib.parse.urlsplit(self.api_url)
            conn = (
                http.client.HTTPSConnection(url.netloc, timeout=wait, context=self.tls)
                if url.scheme == "https"
                else http.client.HTTPConnection(url.netloc, timeout=wait)
            )
            sent = False
            try:
                conn.request(method, url.path.rstrip("/") + path, body=body, headers=sent_headers, encode_chunked=not replayable)
                sent = True
                res = conn.getresponse()
            except TimeoutError as err:
                conn.close()
                raise SpaceClientError("TIMEOUT", f"{method} {path} took longer than {wait} s (pass timeout= to wait longer)") from err
            except ssl.SSLError as err:
                conn.close()
                raise tls_failed(self.api_url, err) from err
            except OSError as err:
                conn.close()
                if sent and replayable and not resent:
                    # Sent, but the answer was lost: sent again once, to the next control plane if several
                    # (safe: a GET changes nothing, anything else carries its idempotency key).
                    resent = True
                    self._current = (self._current + 1) % len(self.api_urls)
                    continue
                if sent or not isinstance(err, _not_connected):
                    raise SpaceClientError("NETWORK", f"{method} {path} at {self.api_url}: {err}") from err
                if replayable and failovers + 1 < len(self.api_urls):
                    failovers += 1
                    self._current = (self._current + 1) % len(self.api_urls)
                    continue
                raise unreachable(self.api_url, err) from err
            if res.status < 400:
                return res
            error = api_error(res.status, res.read(64 * 1024), res.getheader("x-request-id"), res.getheader("retry-after"))
            conn.close()
            # Refused before it ran, or its first sending still runs: waited out and sent again.
            if (isinstance(error, TooManyRequests) or error.code == "IDEMPOTENCY_IN_PROGRESS") and replayable and retries < self.retry.attempts:
                retries += 1
                retry_after = res.getheader("retry-after")
                time.sleep(min(self.retry.max_wait, float(retry_after) if retry_after else 1.0))
                continue
            raise error

    def websocket(self, path: str) -> WebSocket:
        """A stream (WebSocket) to the control plane in use."""
        return WebSocket(self.api_url, path, self.api_key, self.timeout, self.tls)

    def json(self, method: str, path: str, *, json: Any = None, body: Body = None, headers: dict[str, str] | None = None, timeout: float | None = None) -> Any:
        """A call whose reply is JSON, parsed; a reply that is not JSON raises PROTOCOL with the status and an excerpt."""
        res = self.request(method, path, json=json, body=body, headers=headers, timeout=timeout)
        try:
            raw = res.read()
        finally:
            res.close()
        try:
            return jsonlib.loads(raw) if raw else None
        except ValueError as err:
            raise SpaceClientError("PROTOCOL", f"{method} {path}: HTTP {res.status} answered something that is not JSON: {raw[:200]!r}") from err
