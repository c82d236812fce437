"""Not run: type-checked by test_types.py. What a user's code gets from each await of `AsyncSpace` (mypy's view)."""

from __future__ import annotations

from typing import assert_type

from space import AsyncSpace, ExecEvent, ExecResult, FileChange
from space.asyncio_client import AsyncExecStream, AsyncFileWatch, AsyncSession
from space.wire_types import CheckpointData, FileEntry


async def agent() -> None:
    async with AsyncSpace() as space:
        session = await space.sessions.create(template="base")
        assert_type(session, AsyncSession)
        assert_type(await session.exec("echo hi"), ExecResult)
        assert_type(await session.files.write("a.txt", b"x"), FileEntry)
        assert_type(await session.checkpoint(kind="fs"), CheckpointData)
        forks = await space.checkpoints.fork("chk_x", count=2)
        assert_type(forks[0].data["id"], str)
        async with await session.exec_stream("ls") as stream:
            assert_type(stream, AsyncExecStream)
            async for event in stream:
                assert_type(event, ExecEvent)
        async with await session.files.watch(".") as watch:
            assert_type(watch, AsyncFileWatch)
            async for change in watch:
                assert_type(change, FileChange)
        async for line in await space.templates.build_log("t", "b"):
            assert_type(line, str)
