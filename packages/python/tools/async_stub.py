"""Writes `space/asyncio_client.pyi`: `AsyncSpace` typed method by method, from the sync classes.

At run time `AsyncSpace` is one proxy (`asyncio_client.py`) over `Space`'s code; this stub tells type
checkers what each awaited call returns, so `await space.sessions.create()` is an `AsyncSession`. It
is derived from the classes listed in `asyncio_client.WRAPPED`, never written by hand: a test
regenerates it and fails when the file differs (`python3 tools/async_stub.py` rewrites it)."""

from __future__ import annotations

import builtins
import inspect
import re
import sys
import types
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
STUB = SRC / "space" / "asyncio_client.pyi"
#: A name in an annotation, dotted ones (`ssl.SSLContext`) whole.
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")


def render() -> str:
    sys.path.insert(0, str(SRC))
    from space import asyncio_client

    wrapped = {cls.__name__: f"Async{cls.__name__}" for cls in asyncio_client.WRAPPED}
    imports: dict[str, set[str]] = {"": {"builtins"}}
    imported_from: dict[str, str] = {}

    def annotation(text: str, module: types.ModuleType) -> str:
        """An annotation of the sync code in the stub's terms: the SDK's wrapped classes by their async names, other names imported."""
        def swap(match: re.Match[str]) -> str:
            name = match.group(0)
            if name in wrapped:
                return wrapped[name]
            if name == "list":  # a class's own `list` method would shadow it
                return "builtins.list"
            if hasattr(builtins, name) or name == "None":
                return name
            value = module.__dict__[name.split(".")[0]]
            if isinstance(value, types.ModuleType):
                imports.setdefault("", set()).add(value.__name__)
                return name
            home = getattr(value, "__module__", None)
            source = home if home and getattr(sys.modules.get(home), name, None) is value else module.__name__
            source = imported_from.setdefault(name, source)  # an alias (`CodeLanguage`) seen in several modules: the first
            imports.setdefault(source, set()).add(name)
            return name

        return _NAME.sub(swap, text)

    def signature(fn: object, module: types.ModuleType, returns: str | None = None) -> str:
        sig = inspect.signature(fn)  # type: ignore[arg-type]
        params = []
        star_done = False
        for p in sig.parameters.values():
            if p.kind is p.KEYWORD_ONLY and not star_done:
                params.append("*")
                star_done = True
            if p.kind is p.VAR_POSITIONAL:
                star_done = True
            text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
            if p.annotation is not p.empty:
                text += f": {annotation(p.annotation, module)}"
            if p.default is not p.empty:
                text += " = ..."
            params.append(text)
        result = returns if returns is not None else annotation(sig.return_annotation, module)
        return f"({', '.join(params)}) -> {result}"

    def members(cls: type) -> list[str]:
        """A sync class's attributes and methods as its async twin's: each method awaitable, iterators async ones."""
        module = sys.modules[cls.__module__]
        lines = [f"    {name}: {annotation(text, module)}" for name, text in cls.__dict__.get("__annotations__", {}).items()]
        for name, member in cls.__dict__.items():
            if isinstance(member, property):
                lines.append(f"    {name}: {annotation(inspect.signature(member.fget).return_annotation, module)}")  # type: ignore[arg-type]
            elif name == "__iter__":
                item = re.fullmatch(r"Iterator\[(.*)\]", inspect.signature(member).return_annotation)
                assert item, f"{cls.__name__}.__iter__ is not annotated Iterator[...]"
                lines.append(f"    def __aiter__(self) -> AsyncIterator[{annotation(item.group(1), module)}]: ...")
                imports.setdefault("typing", set()).add("AsyncIterator")
            elif name == "__enter__":
                lines.append(f"    async def __aenter__(self) -> {wrapped[cls.__name__]}: ...")
                lines.append("    async def __aexit__(self, *_: object) -> None: ...")
            elif callable(member) and not name.startswith("_"):
                returns = inspect.signature(member).return_annotation
                generator = re.fullmatch(r"Iterator\[(.*)\]", returns)
                if generator:  # a generator's events come by `async for` over the awaited result
                    imports.setdefault("typing", set()).add("AsyncIterator")
                    returns = f"AsyncIterator[{annotation(generator.group(1), module)}]"
                else:
                    returns = annotation(returns, module)
                lines.append(f"    async def {name}{signature(member, module, returns)}: ...")
        return lines

    classes = []
    for cls in asyncio_client.WRAPPED:
        bases = [wrapped[b.__name__] for b in cls.__bases__ if b.__name__ in wrapped] or ["AsyncProxy"]
        lines = [f"class {wrapped[cls.__name__]}({', '.join(bases)}):", f'    """`{cls.__name__}`, awaitable."""', *members(cls)]
        classes.append("\n".join(lines))

    own = sys.modules[asyncio_client.__name__]
    space_lines = ["class AsyncSpace(AsyncProxy):", '    """`Space`, awaitable: `session = await space.sessions.create(template="base")`."""']
    space_lines += members(asyncio_client.Space)
    space_lines.append(f"    def __init__{signature(asyncio_client.AsyncSpace.__init__, own)}: ...")
    space_lines.append("    def close(self) -> None: ...")
    space_lines.append("    async def __aenter__(self) -> AsyncSpace: ...")
    space_lines.append("    async def __aexit__(self, *_: object) -> None: ...")

    proxy = ["class AsyncProxy:", '    """One of the SDK\'s objects with its methods awaitable."""',
             f"    def __init__{signature(asyncio_client.AsyncProxy.__init__, own)}: ..."]
    header = [
        "# Generated by packages/python/tools/async_stub.py from the sync classes (asyncio_client.WRAPPED): do not edit.",
        "from __future__ import annotations",
        "",
    ]
    header += [f"import {name}" for name in sorted(imports.pop("", set()))]
    header += [f"from {source} import {', '.join(sorted(names))}" for source, names in sorted(imports.items())]
    return "\n".join(header + ["", ""] + ["\n\n\n".join(["\n".join(proxy), *classes, "\n".join(space_lines)])]) + "\n"


if __name__ == "__main__":
    STUB.write_text(render())
    print(f"wrote {STUB}")
