"""toolledger beside its peers: the same tool through each stack's tool path and agent loop.

``python -m benchmarks.peers`` times ``add(a, b)`` (:mod:`.tool`) through openai-agents,
pydantic-ai and the MCP SDK (the extra ``bench``: ``pip install toolledger[bench]``) and
through toolledger (:mod:`.ledger`), in one process run, each sample of each stack in turn
(:func:`~benchmarks.harness.interleave`), and prints the ratios. A peer that is not installed is
named and left out; the others are timed. None of the peers records anything: the figures
compare a recorded call with unrecorded ones. docs/performance.md, "Peers", has a run.

Four groups:

- **tool path**: one call made in a loop, against a bare ``await add(**args)``. toolledger's is
  a nested call (``ctx.execute_tool``) on each store.
- **agent loop**: a whole run in which a scripted model calls ``add`` ``n`` times then answers,
  per turn, for n = 20 and 2 000 (5 and 20 with ``--quick``).
- **long loop**: toolledger's session of 200 and of 20 000 calls timed as an outside harness
  times it (:mod:`.longloop`): whole runs, per call ``(run(K) − run(0)) / K``.
- **MCP served**: the SDK's client calling ``add`` served by toolledger
  (:func:`engine.mcp.mcp_server`, a host call of a session) beside the SDK's ``MCPServer``
  with the same tool, both in memory under trio.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import time
from collections.abc import Callable, Sequence
from functools import partial
from types import ModuleType

import attrs

from ..harness import Figure, Row, Settings, fmt, interleave, paired
from .longloop import long_loop
from .tool import ARGS, add

__all__ = ["GROUPS", "INSTALL", "PEERS", "STORE_PEERS", "Peer", "missing", "run", "versions"]

US = 1e6
INSTALL = "pip install toolledger[bench]"


@attrs.frozen
class Peer:
    """A stack to compare with: its distribution, the module it is imported as, and the module
    of this package that times it."""

    name: str
    imports: str
    module: str

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.imports) is not None

    def load(self) -> ModuleType:
        return importlib.import_module(f"{__name__}.{self.module}")


PEERS = (
    Peer("openai-agents", "agents", "with_openai_agents"),
    Peer("pydantic-ai", "pydantic_ai", "with_pydantic_ai"),
    Peer("mcp", "mcp", "with_mcp"),
)
#: the peers of the ``stores`` group only (:mod:`.stores`)
STORE_PEERS = (Peer("eventsourcing", "eventsourcing", "with_eventsourcing"),)
STACKS = ("toolledger", *(peer.name for peer in PEERS + STORE_PEERS))


def missing(only: Sequence[str] = ()) -> list[str]:
    """The peers asked for (all by default) that are not installed."""
    return [peer.name for peer in PEERS + STORE_PEERS
            if (not only or peer.name in only) and not peer.installed]


def versions(only: Sequence[str] = ()) -> dict[str, str]:
    """The version of each stack timed."""
    names = ["toolledger"] + [peer.name for peer in PEERS + STORE_PEERS
                              if (not only or peer.name in only) and peer.installed]
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "source checkout"
    return found


def _bare_await(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    import asyncio

    async def main() -> float:
        args = ARGS
        start = clock()
        for _ in range(calls):
            await add(**args)
        return clock() - start

    return asyncio.run(main()) / calls * US


def _ratio(figure: Figure, reference: Figure | None) -> str:
    if reference is None or figure is reference:
        return ""
    return f"{paired(figure, reference, lambda a, b: a / b):.2f}× toolledger (JsonlStore)"


def tool_path(settings: Settings, stacks: Sequence[str]) -> list[Row]:
    from . import ledger

    calls = settings.size(10_000, 200)
    clock = settings.clock
    named: list[tuple[str, Callable[[], float]]] = []
    if "toolledger" in stacks:
        for store in ledger.STORES:
            named.append((f"toolledger ctx.execute_tool, {store}",
                          partial(ledger.nested_call, store, calls, clock)))
    for peer in PEERS:
        if peer.name not in stacks:
            continue
        module = peer.load()
        label = {"openai-agents": "openai-agents FunctionTool.on_invoke_tool",
                 "pydantic-ai": "pydantic-ai ToolManager.handle_call",
                 "mcp": "mcp MCPServer.call_tool"}[peer.name]
        named.append((label, partial(module.tool_path, calls, clock)))
        if peer.name == "mcp":  # ten times slower: fewer calls per sample
            named.append(("mcp Client.call_tool, in-memory transport",
                          partial(module.client_call, max(calls // 10, 20), clock)))
    for _, measure in named:  # warm up: imports, schemas, caches
        measure()
    samples = interleave(settings.reps(), [measure for _, measure in named]
                         + [partial(_bare_await, calls, clock)])
    bare = Figure(name="bare await add(**args)", unit="µs/call", samples=tuple(samples[-1]))
    figures = [Figure(name=name, unit="µs/call", samples=tuple(values))
               for (name, _), values in zip(named, samples)]
    reference = figures[0] if "toolledger" in stacks else None
    rows = []
    for figure in figures:
        overhead = paired(figure, bare, lambda a, b: a - b)
        ratio = _ratio(figure, reference)
        rows.append(Row(group="tool path", figure=figure, baseline=bare,
                        comparison=f"+{overhead:.1f} µs" + (f", {ratio}" if ratio else ""),
                        note=_NOTES.get(figure.name, "")))
    return rows


_NOTES = {
    "toolledger ctx.execute_tool, JsonlStore":
        "the README's store, not durable: the reference of every ratio in this group",
    "toolledger ctx.execute_tool, MemoryStore(check_encodable=False)":
        "the floor: a store no user runs, that keeps the records without encoding them",
    "mcp Client.call_tool, in-memory transport":
        "the protocol's path: a JSON-RPC request and response over in-memory streams",
}


def agent_loop(settings: Settings, stacks: Sequence[str]) -> list[Row]:
    from . import ledger

    lengths = (5, 20) if settings.quick else (20, 2_000)
    clock = settings.clock
    runs: list[tuple[str, Callable[[int], float]]] = []
    if "toolledger" in stacks:
        for store in ("JsonlStore", "MemoryStore()"):
            runs.append((f"toolledger FauxModel session, {store}",
                         partial(ledger.agent_loop, store, clock=clock)))
    for peer in PEERS:
        if peer.name in stacks and peer.name != "mcp":
            label = {"openai-agents": "openai-agents Runner.run, scripted Model",
                     "pydantic-ai": "pydantic-ai Agent.run, FunctionModel"}[peer.name]
            runs.append((label, partial(peer.load().agent_loop, clock=clock)))
    for _, measure in runs:
        measure(lengths[0])  # warm up
    by_length: dict[int, list[Figure]] = {}
    for length in lengths:
        # the long peer sessions take a minute each: fewer rounds of them
        reps = settings.reps(5, 2) if length == lengths[0] else settings.reps(3, 1)
        # short sessions are run several times per sample, so that a sample is not one tick
        inner = max(1, 200 // length)

        def sample(measure: Callable[[int], float], length: int = length,
                   inner: int = inner) -> float:
            values = sorted(measure(length) for _ in range(inner))
            return values[len(values) // 2]

        samples = interleave(reps, [partial(sample, measure) for _, measure in runs])
        by_length[length] = [
            Figure(name=f"{name}, {length:,} calls", unit="µs/turn", samples=tuple(values))
            for (name, _), values in zip(runs, samples)]
    rows = []
    for length in lengths:
        figures = by_length[length]
        reference = figures[0] if "toolledger" in stacks else None
        for index, figure in enumerate(figures):
            short = by_length[lengths[0]][index]
            parts = []
            if figure is not short:
                parts.append(f"{figure.median / short.median:.2f}× its {lengths[0]}-call run")
            if ratio := _ratio(figure, reference):
                parts.append(ratio)
            rows.append(Row(group="agent loop", figure=figure,
                            baseline=None if figure is short else short,
                            comparison=", ".join(parts)))
    return rows


def served(settings: Settings, stacks: Sequence[str]) -> list[Row]:
    """An MCP client's call to a session's tools served by toolledger, beside the same call to
    the SDK's own ``MCPServer`` with the same tool, both in memory under trio (the served
    session records every fact; the MCPServer nothing).

    Both servers are the SDK's low-level ``Server`` under the same client and transport; they
    differ in their ``tools/call`` handler: ``MCPServer.call_tool`` against a host call of the
    session. So a served call is not slower than ``MCPServer``'s only if the host call costs
    no more than ``MCPServer.call_tool`` (timed alone, under trio); and a host call must at
    least record its four events (the floor, timed alone too, as the dispatch group's)."""
    if "toolledger" not in stacks or "mcp" not in stacks:
        return []
    from . import ledger, with_mcp

    calls = settings.size(2_000, 50)
    clock = settings.clock
    stores = list(ledger.FLOOR_KINDS)
    named: list[tuple[str, Callable[[], float]]] = [
        (f"mcp Client.call_tool → toolledger mcp_server, {store}",
         partial(ledger.served_call, store, calls, clock))
        for store in stores]
    named.append(("mcp Client.call_tool → MCPServer, trio",
                  partial(with_mcp.served_beside, calls, clock)))
    named.append(("MCPServer.call_tool alone, trio: its tools/call handler",
                  partial(with_mcp.handler_beside, calls, clock)))
    named += [(f"a host call's four records {FLOOR_WORK[store]}, nothing else, {store}",
               partial(ledger.served_floor, store, calls, clock))
              for store in stores]
    for _, measure in named:  # warm up
        measure()
    samples = interleave(settings.reps(), [measure for _, measure in named])
    figures = [Figure(name=name, unit="µs/call", samples=tuple(values))
               for (name, _), values in zip(named, samples)]
    ours, (sdk, handler), floors = (figures[:len(stores)], figures[len(stores):-len(stores)],
                                    figures[-len(stores):])
    rows = []
    for figure, floor in zip(ours, floors):
        ratio = paired(figure, sdk, lambda a, b: a / b)
        stopped = ratio > 1 and floor.median > handler.median
        rows.append(Row(
            group="MCP served", figure=figure, baseline=sdk,
            comparison=f"{ratio:.2f}× MCPServer",
            target="≤ 1.00× MCPServer", met=ratio <= 1,
            floor=f"{fmt(floor.median, floor.unit)} {floor.unit}: {floor.name}"
            if stopped else "",
            note="a host call of the session: governed, and every fact recorded"))
    rows.append(Row(group="MCP served", figure=sdk, baseline=None, comparison="",
                    note="the SDK's own server, same tool, client and transport; records "
                         "nothing"))
    rows.append(Row(group="MCP served", figure=handler, baseline=None, comparison="",
                    note="what MCPServer's handler does for a call: a served call is not "
                         "slower only if the session's host call costs no more"))
    rows += [Row(group="MCP served", figure=floor,
                 note=f"the floor under the served call on {store}: a host call cannot skip "
                      f"it, so where it costs more than MCPServer's handler, the served call "
                      f"is slower than MCPServer's")
             for store, floor in zip(stores, floors)]
    return rows


#: what a host call's log cannot skip, by store
FLOOR_WORK = {"JsonlStore": "encoded, proven, sealed and written",
              "MemoryStore()": "encoded and proven"}


def run(settings: Settings, only: Sequence[str] = (), groups: Sequence[str] = ()) -> list[Row]:
    """The rows of the groups asked for (all by default: :data:`GROUPS`) for the stacks asked
    for (all by default) that are installed."""
    absent = set(missing(only))
    stacks = [name for name in STACKS if (not only or name in only) and name not in absent]
    rows: list[Row] = []
    for name, group in GROUPS.items():
        if not groups or name in groups:
            rows += group(settings, stacks)
    return rows


def stores_group(settings: Settings, stacks: Sequence[str]) -> list[Row]:
    """toolledger's database stores beside the ``eventsourcing`` library's recorders
    (:mod:`.stores`)."""
    from . import stores as group

    return group.run(settings, stacks)


#: The groups, by the name ``--group`` takes.
GROUPS: dict[str, Callable[[Settings, Sequence[str]], list[Row]]] = {
    "tool-path": tool_path, "agent-loop": agent_loop, "served": served, "stores": stores_group,
    "long-loop": long_loop,
}
