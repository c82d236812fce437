"""`AsyncSpace`: `Space`'s calls, awaitable. Each call runs the same code as `Space`'s in the client's
worker threads (the SDK's HTTP is blocking I/O), so both clients have the same methods by
construction: `await space.sessions.create(...)`, `await session.exec(...)`, and `async for` over
streams and cell events. Up to `max_concurrency` calls run at once; more wait their turn here."""

from __future__ import annotations

import asyncio
import functools
import ssl
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from typing import Any

from ._transport import RetryPolicy
from .client import Checkpoints, Nodes, Secrets, Sessions, Space, Templates, Volumes
from .code_interpreter import CodeContexts
from .exec_stream import ExecStream
from .file_watch import FileWatch
from .session import CheckpointFiles, Session, SessionFiles, SessionHandle

#: The SDK's classes whose objects, met as a call's result or an attribute, get awaitable methods too.
#: `asyncio_client.pyi` types each as `Async<Name>`, generated from this table (tools/async_stub.py).
WRAPPED: tuple[type, ...] = (Sessions, Checkpoints, Secrets, Templates, Volumes, Nodes, SessionHandle, Session, SessionFiles, CheckpointFiles, CodeContexts, ExecStream, FileWatch)


class AsyncProxy:
    """One of the SDK's objects with its methods awaitable; its SDK attributes (`files`, `sessions`) proxied the same way."""

    def __init__(self, target: Any, pool: ThreadPoolExecutor) -> None:
        self._target = target
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return _wrap(value, self._pool)

        @functools.wraps(value)
        async def call(*args: Any, **kwargs: Any) -> Any:
            result = await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(value, *args, **kwargs))
            return _wrap(result, self._pool)

        return call

    def __aiter__(self) -> Any:
        """`async for` over a stream: each next event is read in a worker thread."""
        iterator = iter(self._target)
        done = object()

        async def events() -> Any:
            loop = asyncio.get_running_loop()
            while (event := await loop.run_in_executor(self._pool, next, iterator, done)) is not done:
                yield event

        return events()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *_: object) -> None:
        """Leaving `async with` over a stream or a watch closes it (in a worker thread: closing may wait on the network)."""
        await asyncio.get_running_loop().run_in_executor(self._pool, self._target.close)

    def __repr__(self) -> str:
        return f"<async {self._target!r}>"


def _wrap(value: Any, pool: ThreadPoolExecutor) -> Any:
    if isinstance(value, list):
        return [_wrap(v, pool) for v in value]
    if isinstance(value, WRAPPED) or isinstance(value, Iterator):
        return AsyncProxy(value, pool)  # an iterator: cell events, a build's log, the tenant's events
    return value


class AsyncSpace(AsyncProxy):
    """`Space`, awaitable: `space = AsyncSpace(); session = await space.sessions.create(template="base")`."""

    def __init__(self, api_url: str | list[str] | None = None, api_key: str | None = None, *, timeout: float = 120.0,
                 retry: RetryPolicy = RetryPolicy(), env: dict[str, str] | None = None, tls: ssl.SSLContext | None = None,
                 max_concurrency: int = 64) -> None:
        super().__init__(Space(api_url, api_key, timeout=timeout, retry=retry, env=env, tls=tls), ThreadPoolExecutor(max_concurrency, thread_name_prefix="space"))

    def close(self) -> None:
        """Ends the worker threads (calls under way finish first)."""
        self._pool.shutdown(wait=True)

    async def __aenter__(self) -> AsyncSpace:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()
