"""What ``toolledger serve frameworks_served:session`` serves to the tests that drive it from
other agent frameworks (tests/mcp/test_frameworks_*.py): a session on the JSONL log named by
``SERVED_LOG``, with a read-only tool (which a ``tool_call`` handler blocks for one note), a
destructive one (the policy asks the approver) and one a deny rule refuses. The approver
refuses (the default), or, with ``SERVED_APPROVER=later``, leaves every request for a person
to answer over ``toolledger serve --approvals``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs

from engine import (
    LATER,
    Annotations,
    Block,
    PolicyRules,
    Session,
    ToolResult,
    deny_all,
    text,
    tool,
)
from engine.cli._common import read_sessions
from engine.core.reducers import CallView, fold
from events import JsonlStore

NOTES = {"groceries": "eggs, milk", "todo": "write the docs"}

TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


@tool(input_schema=TITLE, annotations=Annotations(read_only=True))
async def read_note(call: Any, ctx: Any) -> ToolResult:
    """Read a note."""
    return ToolResult(content=[text(NOTES.get(call.arguments["title"], "no such note"))])


@tool(input_schema=TITLE, annotations=Annotations(destructive=True))
async def delete_note(call: Any, ctx: Any) -> ToolResult:
    """Delete a note."""
    return ToolResult(content=[text(f"deleted {call.arguments['title']}")])


@tool(annotations=Annotations(read_only=True))
async def drop_notes(call: Any, ctx: Any) -> ToolResult:
    """Delete every note (a deny rule refuses it, whatever it declares)."""
    return ToolResult(content=[text("dropped")])


def later(request: Any) -> Any:
    """Every request waits for a person."""
    return LATER


def private(draft: Any) -> Block | None:
    """A ``tool_call`` handler: the diary is not to be read."""
    if draft.name == "read_note" and draft.arguments.get("title") == "diary":
        return Block("the diary is private")
    return None


@asynccontextmanager
async def session() -> AsyncIterator[Session]:
    approver = later if os.environ.get("SERVED_APPROVER") == "later" else deny_all
    async with Session.open(JsonlStore(os.environ["SERVED_LOG"]),
                            tools=[read_note, delete_note, drop_notes],
                            rules=PolicyRules(deny=["drop_*"]), approver=approver) as opened:
        opened.on_tool_call(private)
        yield opened


# -- for the tests: how to start it, and what its log says ----------------------------------

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


@attrs.frozen
class Served:
    """``toolledger serve frameworks_served:session`` as a subprocess command: ``command`` and
    ``args`` to run in ``cwd`` with ``env``, logging to ``log``; ``approvals``: the socket a
    person answers on (then every approval waits for one)."""

    log: str
    approvals: str | None = None

    @property
    def command(self) -> str:
        return sys.executable

    @property
    def args(self) -> list[str]:
        more = [] if self.approvals is None else ["--approvals", self.approvals]
        return ["-m", "engine.cli", "serve", "frameworks_served:session", "--name", "notes",
                *more]

    @property
    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT), "SERVED_LOG": self.log,
                "SERVED_APPROVER": "deny_all" if self.approvals is None else "later"}

    @property
    def cwd(self) -> str:
        return str(TESTS)

    @asynccontextmanager
    async def over_http(self) -> AsyncIterator[str]:
        """Serve it over streamable HTTP (``--http 0``) for the block, from asyncio: the
        endpoint's URL, as the command printed it. At the end it is stopped as a person
        would stop it (Ctrl-C), and must exit 0; it is killed if the block fails first."""
        process = await asyncio.create_subprocess_exec(
            self.command, *self.args, "--http", "0", cwd=self.cwd,
            env={**os.environ, **self.env}, stderr=asyncio.subprocess.PIPE)
        assert process.stderr is not None
        try:
            printed = b""
            while (found := re.search(rb"over MCP at (http://\S+/mcp) ", printed)) is None:
                line = await process.stderr.readline()
                assert line, printed.decode()  # it ended before serving
                printed += line
            yield found.group(1).decode()
            process.send_signal(signal.SIGINT)
            await process.stderr.read()
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

    def calls(self) -> Mapping[str, CallView]:
        """The calls the served session recorded, by id (its log holds one session)."""
        [records] = read_sessions(self.log).values()
        return fold(records).calls
