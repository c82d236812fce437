"""A real platform for the Python SDK's tests: `space up` started as a user would (the repository's
CLI on SPACE's Node.js, `SPACE_NODE`), on the end-to-end tests' data directory (templates built once)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from space import Space

ROOT = Path(__file__).resolve().parents[3]
NODE = os.environ.get("SPACE_NODE", "node")


class Platform:
    def __init__(self, env: dict[str, str]) -> None:
        self.admin_key = f"py-test-{os.getpid()}-{secrets.token_hex(8)}"
        self.output: list[str] = []
        self.process = subprocess.Popen(
            [NODE, str(ROOT / "packages/cli/dist/main.js"), "up"],
            env={
                **os.environ,
                "SPACE_DATA_DIR": os.environ.get("SPACE_TEST_DATA_DIR", "/var/lib/space-test"),
                "SPACE_PORT": "0",
                "SPACE_API_KEY": self.admin_key,
                "SPACE_QUIET": "1",
                "SPACE_POOL_SIZE": "0",
                "SPACE_TEMPLATE_IMAGES": "0",
                **env,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                if not found.is_set() and (m := re.search(r"SPACE is up: (http://\S+)", line)):
                    self.url = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(600):
            self.process.kill()
            raise RuntimeError("the platform did not start within 600 s:\n" + "".join(self.output[-50:]))

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(120)


@pytest.fixture(scope="session")
def platform() -> Iterator[Platform]:
    # A low request rate, so that a test can meet a 429 (and the SDK waits the others' out).
    running = Platform({"SPACE_TEMPLATES": "base,tiny,code-interpreter", "SPACE_TENANT_REQUESTS_PER_SEC": "20"})
    try:
        yield running
    finally:
        code = running.stop()
        assert code == 0, "".join(running.output[-50:])


@pytest.fixture()
def space(platform: Platform) -> Iterator[Space]:
    """A client with the admin key; the sessions a test leaves are deleted after it."""
    client = Space(platform.url, platform.admin_key)
    before = {s.id for s in client.sessions.list()}
    yield client
    for session in client.sessions.list():
        if session.id not in before:
            session.delete()
