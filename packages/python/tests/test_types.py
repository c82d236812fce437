"""The SDK's types as a type checker sees them (Debian's mypy): hints on every function, and `AsyncSpace`
typed method by method by a stub that is generated from the sync classes and kept current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE / "tools"))

import async_stub  # noqa: E402


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir=/dev/null", *args], capture_output=True, text=True, cwd=PACKAGE)


def test_the_async_stub_is_what_the_sync_classes_make():
    assert async_stub.STUB.read_text() == async_stub.render(), "src/space/asyncio_client.pyi is stale: run python3 packages/python/tools/async_stub.py"


def test_every_function_is_typed_and_async_calls_have_their_sync_types():
    """The installed package (stub included, as a user's checker finds it), then code using it."""
    for what in (["--disallow-untyped-defs", "--disallow-incomplete-defs", "-p", "space"], ["tests/typed_usage.py"]):
        checked = mypy(*what)
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("line, expected", [
    ("space.sessions.creat()", 'has no attribute "creat"'),
    ("(await space.sessions.create()).exec(1)", 'incompatible type "int"'),
    ("(await space.sessions.create()).files.read()", "Missing positional argument"),
])
def test_a_wrong_async_call_fails_the_type_check(tmp_path: Path, line: str, expected: str):
    wrong = tmp_path / "wrong.py"
    wrong.write_text(f"from space import AsyncSpace\n\n\nasync def f(space: AsyncSpace) -> None:\n    await {line}\n")
    checked = mypy(str(wrong))
    assert checked.returncode == 1 and expected in checked.stdout, checked.stdout
