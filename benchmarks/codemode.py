"""Code mode: a program making N tool calls beside N model turns doing the same work, and a
call from a program beside a direct nested call.

    PYTHONPATH=. python -m benchmarks.codemode [--quick] [--repeat N] [--latency S]
                                               [--markdown]

Needs the ``codemode`` extra. The model is a faux one that takes ``--latency`` seconds (0.2 by
default) to answer each turn, as a provider would; the tool is ``echo`` (a typed tool that
returns its text). Figures:

- **N calls as N model turns**: the model asks for one call a turn, N turns, then answers: the
  baseline. Its tokens are what the session declares and sends the model over the prompt, in
  characters of JSON / 4 (the tools' declarations each turn, and the transcript so far);
- **N calls from one program**: one turn asks ``run_code`` with a program making the N calls
  in a loop, a second turn answers; its tokens counted the same way (the code tool's
  description, with the stubs, and the program);
- **per call from a program** against **per direct nested call**: the wall time of one call,
  from a program's loop of N calls (Monty's round trip through a thread, the nested call, the
  answer) and from a tool body's loop of N ``ctx.execute_tool`` calls, both with no model
  latency.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import trio

from engine import Annotations, Session, ToolCall, ToolContext, ToolResult, text, tool
from engine.codemode import CODE_TOOL, code_tool
from engine.models import FauxModel, FauxStep, ModelMessage, ModelRequest, faux_text, \
    faux_tool_call
from events import MemoryStore

from .harness import Figure, Row, Settings, interleave, paired
from .report import group_command, run_group

__all__ = ["main", "run"]

SAFE = Annotations(read_only=True, open_world=False)


@tool(annotations=SAFE, exposure="codemode")
async def echo(text: str) -> str:
    """Give the text back."""
    return text


@tool(annotations=SAFE)
async def echo_direct(text: str) -> str:
    """Give the text back (called directly)."""
    return text


@tool(annotations=SAFE)
async def nested_loop(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Call echo_direct N times as nested calls."""
    for i in range(int(call.arguments["n"])):
        await ctx.execute_tool("echo_direct", {"text": str(i)})
    return ToolResult(content=[text("done")])


class Timed:
    """A faux model that takes ``latency`` seconds a turn and counts the characters it was
    sent: the tools declared and the transcript, as JSON."""

    def __init__(self, script: list[FauxStep], latency: float) -> None:
        self._faux = FauxModel(script)
        self._latency = latency
        self.sent = 0

    async def complete(self, request: ModelRequest) -> ModelMessage:
        tools = [{"name": t.name, "description": t.description, "schema": t.input_schema}
                 for t in request.tools]
        self.sent += len(json.dumps(tools)) + len(json.dumps(
            [repr(entry) for entry in request.transcript]))
        if self._latency:
            await trio.sleep(self._latency)
        return await self._faux.complete(request)


PROGRAM = "for i in range({n}):\n    echo(text=str(i))\n'done'"


async def _session(script: list[FauxStep], latency: float, *, code: bool,
                   clock: Any) -> tuple[float, int]:
    model = Timed(script, latency)
    tools = [echo, code_tool()] if code else [echo]
    async with Session.open(MemoryStore(), model=model, tools=tools) as session:
        await session.activate(["echo"])
        started = clock()
        await session.prompt("go")
        took = clock() - started
    return took, model.sent // 4


def turns(n: int, latency: float, clock: Any = time.perf_counter) -> tuple[float, int]:
    """Seconds and tokens for N calls as N model turns."""
    script: list[FauxStep] = [faux_tool_call("echo", {"text": str(i)}) for i in range(n)]
    return trio.run(lambda: _session([*script, faux_text("done")], latency, code=False,
                                     clock=clock))


def program(n: int, latency: float, clock: Any = time.perf_counter) -> tuple[float, int]:
    """Seconds and tokens for N calls from one program."""
    script: list[FauxStep] = [faux_tool_call(CODE_TOOL, {"code": PROGRAM.format(n=n)}),
                              faux_text("done")]
    return trio.run(lambda: _session(script, latency, code=True, clock=clock))


def direct(n: int, clock: Any = time.perf_counter) -> float:
    """Microseconds per direct nested call, from a loop of N in a tool body."""
    async def main() -> float:
        async with Session.open(MemoryStore(), model=None,
                                tools=[echo_direct, nested_loop]) as session:
            started = clock()
            await session.call_tool("nested_loop", {"n": n})
            return (clock() - started) / n * 1e6
    return trio.run(main)


def from_code(n: int, clock: Any = time.perf_counter) -> float:
    """Microseconds per call from a program's loop of N (the sandbox's start included once)."""
    async def main() -> float:
        async with Session.open(MemoryStore(), model=None, tools=[echo, code_tool()]) as session:
            await session.activate(["echo"])
            started = clock()
            outcome = await session.call_tool(CODE_TOOL, {"code": PROGRAM.format(n=n)})
            assert not outcome.is_error, outcome.result.text
            return (clock() - started) / n * 1e6
    return trio.run(main)


LATENCY = 0.2


def run(settings: Settings, latency: float = LATENCY) -> list[Row]:
    """The rows: turns against a program, then a call from code against a direct one."""
    n = settings.size(20, 5)
    reps = settings.reps(3, 1)
    model_latency = latency if not settings.quick else 0.01
    by_turns = [turns(n, model_latency, settings.clock) for _ in range(reps)]
    by_program = [program(n, model_latency, settings.clock) for _ in range(reps)]
    base = Figure(name=f"{n} calls as {n} model turns ({model_latency} s a turn)", unit="s",
                  samples=tuple(t for t, _ in by_turns))
    coded = Figure(name=f"{n} calls from one program (2 turns)", unit="s",
                   samples=tuple(t for t, _ in by_program))
    tokens_base = Figure(name=f"tokens sent, {n} model turns", unit="tokens",
                         samples=tuple(float(k) for _, k in by_turns))
    tokens_coded = Figure(name="tokens sent, one program", unit="tokens",
                          samples=tuple(float(k) for _, k in by_program))
    calls = settings.size(500, 20)
    direct_samples, code_samples = interleave(
        settings.reps(5, 2), [lambda: direct(calls, settings.clock),
                              lambda: from_code(calls, settings.clock)])
    per_direct = Figure(name=f"per direct nested call ({calls} in a body)", unit="µs/call",
                        samples=tuple(direct_samples))
    per_code = Figure(name=f"per call from a program ({calls} in a loop)", unit="µs/call",
                      samples=tuple(code_samples))
    return [
        Row(group="codemode", figure=base),
        Row(group="codemode", figure=coded, baseline=base,
            comparison=f"{paired(base, coded, lambda a, b: a / b):.1f}× faster"),
        Row(group="codemode", figure=tokens_base),
        Row(group="codemode", figure=tokens_coded, baseline=tokens_base,
            comparison=f"{paired(tokens_coded, tokens_base, lambda a, b: a / b):.2f}× the tokens"),
        Row(group="codemode", figure=per_direct),
        Row(group="codemode", figure=per_code, baseline=per_direct,
            comparison=f"{paired(per_code, per_direct, lambda a, b: a - b):+.0f} µs"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = group_command("python -m benchmarks.codemode", __doc__, repeat=3)
    parser.add_argument("--latency", type=float, default=LATENCY,
                        help=f"seconds the faux model takes a turn ({LATENCY})")
    args = parser.parse_args(argv)
    run_group(lambda settings: run(settings, args.latency), args, title="code mode")
    return 0


if __name__ == "__main__":
    sys.exit(main())
