"""The contexts a fragment in the docs may ask for with ``<!-- example in: NAME -->``.

Each is a function of the block's temporary directory (also the current directory) that
returns a context manager, sync or async; entering it yields the names the block starts with,
and leaving it may check what the block did. The docstring of each says what it provides: a
fragment's reader should be able to guess it from the doc's prose. Add one when a new kind of
fragment needs it; keep it small, with stand-in tools that touch nothing outside the directory.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from engine import LATER, Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.types import ResultHandlerFailed

KEY = bytes(range(32))


@tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
      annotations=Annotations(read_only=True))
async def read_file(call: Any, ctx: Any) -> ToolResult:
    """A stand-in: the text of a file, with a secret in it."""
    return ToolResult(content=[text(f"# {call.arguments['path']}\nSECRET=hunter2")])


@tool(input_schema={"type": "object", "properties": {"argv": {"type": "array"}},
                    "required": ["argv"]})
async def run_command(call: Any, ctx: Any) -> ToolResult:
    """A stand-in: runs nothing, exits 0."""
    return ToolResult(content=[text("")], structured_content={"exit_code": 0})


@tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
      annotations=Annotations(destructive=True))
async def delete_file(call: Any, ctx: Any) -> ToolResult:
    """A stand-in: deletes nothing."""
    return ToolResult(content=[text(f"deleted {call.arguments['path']}")])


TOOLS = [read_file, run_command, delete_file]


def script() -> FauxModel:
    """One batch of a read, a command and a deletion (which needs approval), then done."""
    return FauxModel([
        [faux_tool_call("read_file", {"path": "notes.md"}),
         faux_tool_call("run_command", {"argv": ["rm", "-rf", "docs"]}),
         faux_tool_call("delete_file", {"path": "notes.md"})],
        faux_text("done"),
    ])


async def later(request: Any) -> Any:
    """An approver that answers every request later."""
    return LATER


class _HandlerErrors:
    """Wraps the handlers a block registers, keeping what they raise (the engine swallows it:
    a raising handler blocks its call, or is skipped)."""

    def __init__(self) -> None:
        self.raised: list[tuple[str, BaseException]] = []

    def wrap(self, handler: Any) -> Any:
        if inspect.iscoroutinefunction(handler):
            @functools.wraps(handler)
            async def wrapped_async(event: Any) -> Any:
                try:
                    return await handler(event)
                except Exception as exc:
                    self.raised.append((getattr(handler, "__qualname__", repr(handler)), exc))
                    raise
            return wrapped_async

        @functools.wraps(handler)
        def wrapped(event: Any) -> Any:
            try:
                return handler(event)
            except Exception as exc:
                self.raised.append((getattr(handler, "__qualname__", repr(handler)), exc))
                raise
        return wrapped

    def watch(self, session: Session) -> None:
        for name in ("on_tool_call", "on_tool_result"):
            register = getattr(session, name)

            def watched(handler: Any, register: Callable[[Any], Any] = register) -> Any:
                register(self.wrap(handler))
                return handler
            setattr(session, name, watched)


@asynccontextmanager
async def session(directory: Path) -> AsyncIterator[dict[str, Any]]:
    """``session``: an open session on a MemoryStore (also ``store``) with ``tools`` read_file,
    run_command and delete_file (stand-ins); its ``model`` asks for one call of each in one
    batch, then says done; the approver answers LATER, so delete_file waits for
    ``resolve_approval``. If the block did not prompt, the session is prompted after it (the
    pending approvals granted, then resumed), so the handlers it registered run; a handler that
    raised fails the block."""
    store, model, errors = MemoryStore(), script(), _HandlerErrors()
    async with Session.open(store, model=model, tools=TOOLS, approver=later) as opened:
        errors.watch(opened)
        yield {"session": opened, "store": store, "model": model, "tools": TOOLS}
        if not model.requests:
            result = await opened.prompt("tidy up")
            for request in result.pending:
                await opened.resolve_approval(request.call_id, granted=True)
            if result.pending:
                await opened.resume()
        skipped = [r.event for r in opened.records if isinstance(r.event, ResultHandlerFailed)]
    if errors.raised:
        name, exc = errors.raised[0]
        raise AssertionError(f"the handler {name} raised {type(exc).__name__}: {exc}") from exc
    if skipped:
        raise AssertionError(f"the result handler {skipped[0].handler} failed: "
                             f"{skipped[0].error.type}: {skipped[0].error.message}")


async def _write_log(path: str, *, key: bytes | None = None, pause: bool = False) -> str:
    """A session in the JSONL log at ``path``: finished, or paused on call "3.0"; its id."""
    steps: list[Any] = [faux_tool_call("read_file", {"path": "a.md"}),
                        faux_tool_call("read_file", {"path": "b.md"}),
                        faux_tool_call("delete_file", {"path": "a.md"})]
    store = JsonlStore(path, key=key)
    try:
        async with Session.open(store, model=FauxModel([*steps, faux_text("done")]), tools=TOOLS,
                                approver=later if pause else approve_all) as opened:
            result = await opened.prompt("tidy up")
            assert (result.stop == "paused") == pause, result
            return opened.session_id
    finally:
        store.close()


@asynccontextmanager
async def session_log(directory: Path) -> AsyncIterator[dict[str, Any]]:
    """``session.jsonl`` in the current directory holds one finished session (id ``sid``):
    two reads and a deletion, approved; ``tools`` are its (stand-in) tools."""
    yield {"sid": await _write_log("session.jsonl"), "tools": TOOLS}


@asynccontextmanager
async def paused_log(directory: Path) -> AsyncIterator[dict[str, Any]]:
    """``session.jsonl`` holds session ``sid``, paused on call "3.0" (delete_file) for
    approval; ``tools`` are its tools, ``model`` says done when asked, ``approver`` answers
    LATER."""
    sid = await _write_log("session.jsonl", pause=True)
    yield {"sid": sid, "tools": TOOLS, "model": FauxModel([faux_text("done")]),
           "approver": later}


@asynccontextmanager
async def keyed_log(directory: Path) -> AsyncIterator[dict[str, Any]]:
    """``ledger.key`` holds a key and ``session.jsonl`` a finished session (``session_id``)
    sealed with it; ``tools`` are its (stand-in) tools; ``publish(session_id, seq, head)``
    keeps what it is given in ``published``."""
    (directory / "ledger.key").write_bytes(KEY)
    published: list[tuple[Any, ...]] = []
    yield {"session_id": await _write_log("session.jsonl", key=KEY), "tools": TOOLS,
           "publish": lambda *anchor: published.append(anchor), "published": published}


@asynccontextmanager
async def reviewer(directory: Path) -> AsyncIterator[dict[str, Any]]:
    """``notify_reviewer(call_id, name, arguments, reason)``: an async stand-in for telling
    a person, keeping what it is told in ``notified``."""
    notified: list[tuple[Any, ...]] = []

    async def notify_reviewer(*request: Any) -> None:
        notified.append(request)

    yield {"notify_reviewer": notify_reviewer, "notified": notified}


@contextmanager
def myproject(directory: Path) -> Iterator[dict[str, Any]]:
    """A package ``myproject`` in the current directory (importable), whose ``guards`` module
    has a tool_call handler ``no_secrets``."""
    package = directory / "myproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "guards.py").write_text(
        "from engine import Block\n\n\n"
        "def no_secrets(event):\n"
        "    if 'secret' in str(event.arguments).lower():\n"
        "        return Block('no secrets')\n"
        "    return None\n")
    yield {}


@contextmanager
def readme_file(directory: Path) -> Iterator[dict[str, Any]]:
    """A ``README.md`` of 1 234 bytes in the current directory."""
    (directory / "README.md").write_text("x" * 1234)
    yield {}


CONTEXTS: dict[str, Callable[[Path], Any]] = {
    "session": session,
    "session-log": session_log,
    "paused-log": paused_log,
    "keyed-log": keyed_log,
    "reviewer": reviewer,
    "myproject": myproject,
    "readme-file": readme_file,
}
