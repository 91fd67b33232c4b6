"""toolledger's side: ``add`` as a nested call and in a faux-model session, on each store.

The stores are the README's default, a ``JsonlStore`` (not durable) in a fresh file, and the
memory store as it comes, ``MemoryStore()``, which checks that every record would encode; the
tool path adds ``MemoryStore(check_encodable=False)``, the floor no user runs.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import trio

from engine import Annotations, Session, ToolContext, ToolResult, approve_all, text, tool
from engine.core.tools import ToolCall
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.stores.base import EventStore

from ..dispatch import call_batches, log_floor
from ..workload import StoreKind
from .tool import ADD_INPUT, ARGS

__all__ = ["STORES", "agent_loop", "nested_call", "served_call", "served_floor"]

US = 1e6

#: store name -> a factory of a fresh store in a directory
STORES: dict[str, Callable[[str], EventStore]] = {
    "JsonlStore": lambda directory: JsonlStore(os.path.join(directory, "session.jsonl")),
    "MemoryStore()": lambda directory: MemoryStore(),
    "MemoryStore(check_encodable=False)": lambda directory: MemoryStore(check_encodable=False),
}


@tool(name="add", input_schema=ADD_INPUT, annotations=Annotations(read_only=True))
async def add(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Add two integers."""
    return ToolResult(content=(text(str(call.arguments["a"] + call.arguments["b"])),))


#: what ``add`` returns for :data:`ARGS`
ADDED = ToolResult(content=(text(str(ARGS["a"] + ARGS["b"])),))


@contextmanager
def _store(name: str) -> Iterator[EventStore]:
    with tempfile.TemporaryDirectory(prefix="peers-") as directory:
        store = STORES[name](directory)
        try:
            yield store
        finally:
            store.close()


def nested_call(store: str, calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``ctx.execute_tool("add", ARGS)`` made by a driver tool."""
    laps: list[float] = []

    @tool(name="drive", annotations=Annotations(read_only=True))
    async def drive(call: ToolCall, ctx: ToolContext) -> ToolResult:
        await ctx.execute_tool("add", ARGS)  # warm up: the first call compiles the schema
        start = clock()
        for _ in range(calls):
            outcome = await ctx.execute_tool("add", ARGS)
            if outcome.is_error:
                raise RuntimeError(f"add failed: {outcome}")
        laps.append(clock() - start)
        return ToolResult(content=(text("done"),))

    async def main() -> None:
        with _store(store) as events:
            model = FauxModel([faux_tool_call("drive"), faux_text("done")])
            async with Session.open(events, model=model, tools=[add, drive],
                                    approver=approve_all, session_id="peers", create=True) as s:
                await s.prompt("go")

    trio.run(main)
    return laps[0] / calls * US


def agent_loop(store: str, calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per turn of a whole session (opened, prompted, closed) in which the faux
    model calls ``add`` ``calls`` times, then answers."""
    script = [faux_tool_call("add", ARGS) for _ in range(calls)] + [faux_text("done")]
    laps: list[float] = []

    async def main() -> None:
        with _store(store) as events:
            start = clock()
            async with Session.open(events, model=FauxModel(script), tools=[add],
                                    approver=approve_all, session_id="peers", create=True,
                                    max_turns=calls + 1) as session:
                result = await session.prompt("go")
            laps.append(clock() - start)
        if result.stop != "end_turn" or result.turns != calls + 1:
            raise RuntimeError(f"the session ended with {result}")

    trio.run(main)
    return laps[0] / calls * US


def served_call(store: str, calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await client.call_tool("add", ARGS)`` made by the MCP SDK's client
    to a session's tools served by :func:`engine.mcp.mcp_server`, in memory: a host call,
    governed and recorded."""
    from mcp import Client

    from engine.mcp import mcp_server

    laps: list[float] = []

    async def main() -> None:
        with _store(store) as events:
            async with Session.open(events, model=FauxModel([]), tools=[add],
                                    approver=approve_all, session_id="peers",
                                    create=True) as session:
                async with Client(mcp_server(session)) as client:
                    first = await client.call_tool("add", ARGS)
                    if first.is_error:
                        raise RuntimeError(f"the served add failed: {first}")
                    start = clock()
                    for _ in range(calls):
                        await client.call_tool("add", ARGS)
                    laps.append(clock() - start)

    trio.run(main)
    return laps[0] / calls * US


#: the stores a served call's floor is measured for, by the name :data:`STORES` gives them
FLOOR_KINDS: dict[str, StoreKind] = {"JsonlStore": "jsonl", "MemoryStore()": "memory"}


def served_floor(store: str, calls: int, clock: Callable[[], float] = time.perf_counter
                 ) -> float:
    """Microseconds per served call of what its log cannot skip, nothing else: a host call's
    four records of ``add`` encoded and proven (and on the file, sealed and written with an
    append's system calls), as :func:`benchmarks.dispatch.log_floor` measures a nested call's."""
    batches = call_batches(calls, name="add", arguments=ARGS, result=ADDED, origin="host",
                           parent_id=None)
    return log_floor(batches, FLOOR_KINDS[store], clock)
