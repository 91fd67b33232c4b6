"""A session that writes many small calls until it is killed, for the SIGKILL fault test.

    python -m tests.workers.kill_worker                     # a zygote: forks one writer per request
    python -m tests.workers.kill_worker run LOG SEED [TEAR]  # one writer, in the foreground

The **writer** opens the JSONL log LOG and runs prompt after prompt of a scripted session whose
model (seeded by SEED) asks for batches of small calls: parallel ones, nested ones, ones that
need approval (some refused), ones a handler blocks or rewrites, ones that raise, and bulky
results that make long writes. After each batch of records the store has *acknowledged* (its
``append`` returned), it writes ``ACK <seq>`` to its stdout, ``seq`` being the batch's last:
whatever a kill does afterwards, that record must be in the log.

With TEAR > 0 the writer stops in the middle of its TEAR-th batch: it writes the first half of
the batch's bytes, says ``TORN``, and waits to be killed, so the kill leaves a torn last line
for certain (a kill that happens to land inside a ``write`` is rare).

The **zygote** imports everything once, then for each line ``run LOG SEED TEAR`` on its stdin
forks a writer (which first writes ``PID <pid>``), waits for it and writes ``EXIT <pid> <how>``
(``signal N`` or ``code N``). A fork per run keeps each run a real process, killed for real,
without paying for an interpreter and its imports each time. It exits at the end of its stdin.

The tools, handlers and approver are importable (:func:`tools`, :func:`guard`,
:func:`approver`), so the process that checks a killed log can resume it with the same ones.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import trio

from engine import (
    Annotations,
    ApprovalRequest,
    Block,
    Rewrite,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolSpec,
    text,
    tool,
)
from engine.models import ModelMessage, ModelRequest
from events import JsonlStore, Record
from events.stores import jsonl
from events.types import ModelToolCall

SESSION = "kill-session"
#: A writer that was never killed stops after this many acknowledged batches.
MAX_ACKS = 5_000

SAFE = Annotations(read_only=True, open_world=False)
NUMBER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def tools() -> list[ToolSpec]:
    """The writer's tools: small, quick, each a different path through the engine."""

    @tool(input_schema=NUMBER, annotations=Annotations(read_only=True, open_world=False,
                                                       idempotent=True))
    async def lookup(call: Any, ctx: Any) -> ToolResult:
        """Reads something (idempotent: a restart runs it again)."""
        ctx.report_progress("looking", {"n": call.arguments["n"]})
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"found {call.arguments['n']}")],
                          structured_content={"n": call.arguments["n"]})

    @tool(input_schema=NUMBER, annotations=Annotations(destructive=True))
    async def note(call: Any, ctx: Any) -> ToolResult:
        """Writes something: needs approval, and is not idempotent."""
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"noted {call.arguments['n']}")])

    @tool(input_schema=NUMBER, annotations=SAFE)
    async def survey(call: Any, ctx: Any) -> ToolResult:
        """Makes nested calls, in parallel when ``n`` is even."""
        n = call.arguments["n"]
        outcomes: list[Any] = []

        async def one(name: str, k: int) -> None:
            outcomes.append(await ctx.execute_tool(name, {"n": k}))

        if n % 2 == 0:
            async with trio.open_nursery() as nursery:
                for k, name in enumerate(("lookup", "note", "flaky")):
                    nursery.start_soon(one, name, n + k)
        else:
            await one("lookup", n)
            await one("note", n + 1)
        errors = sum(outcome.is_error for outcome in outcomes)
        return ToolResult(content=[text(f"surveyed {len(outcomes)}, {errors} failed")])

    @tool(input_schema=NUMBER, annotations=Annotations(read_only=True, open_world=False,
                                                       idempotent=True))
    async def bulky(call: Any, ctx: Any) -> ToolResult:
        """A large result: a long write, where a kill can tear a line."""
        size = (1_000, 20_000, 200_000)[call.arguments["n"] % 3]
        return ToolResult(content=[text("x" * size)])

    @tool(input_schema=NUMBER, annotations=SAFE)
    async def flaky(call: Any, ctx: Any) -> ToolResult:
        """Raises for odd ``n``."""
        if call.arguments["n"] % 2:
            raise RuntimeError(f"flaky failed for {call.arguments['n']}")
        return ToolResult(content=[text("fine")])

    return [lookup, note, survey, bulky, flaky]


NAMES = ("lookup", "note", "survey", "bulky", "flaky")


def guard(draft: ToolCallDraft) -> Block | Rewrite | None:
    """Blocks some notes and rewrites others."""
    n = draft.arguments.get("n") if isinstance(draft.arguments, dict) else None
    if draft.name != "note" or not isinstance(n, int):
        return None
    if n % 5 == 0:
        return Block(f"note {n} is not allowed")
    if n % 5 == 1:
        return Rewrite({"n": n + 1_000})
    return None


async def approver(request: ApprovalRequest) -> bool:
    """Refuses a quarter of the notes."""
    n = request.arguments.get("n", 0) if isinstance(request.arguments, dict) else 0
    await trio.lowlevel.checkpoint()
    return not (isinstance(n, int) and n % 4 == 3)


class ScriptModel:
    """A model that never runs out: batches of one to four calls, and now and then a text
    message that ends the prompt."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        rng = self._rng
        await trio.lowlevel.checkpoint()
        if rng.random() < 0.15:
            return ModelMessage(text="that is all for now")
        calls = [
            ModelToolCall(id=f"m{rng.randrange(10**6)}_{i}", name=rng.choice(NAMES),
                          arguments={"n": rng.randrange(100)})
            for i in range(rng.randint(1, 4))
        ]
        return ModelMessage(text="", tool_calls=tuple(calls))


class AckingStore(JsonlStore):
    """A JSONL store that says so on a file descriptor once each append has returned."""

    def __init__(self, path: str, fd: int) -> None:
        super().__init__(path)
        self._ack_fd = fd
        self.acks = 0

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        await super().append(session_id, records, expected_seq)
        if records:
            os.write(self._ack_fd, f"ACK {records[-1].seq}\n".encode())
            self.acks += 1


def tear_at(batch: int, fd: int) -> None:
    """Make the ``batch``-th write of this process stop half-way and wait to be killed."""
    whole = jsonl.write_all
    writes = 0

    def write_all(file: int, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if writes != batch:
            whole(file, data)
            return
        whole(file, data[: len(data) // 2])
        os.write(fd, b"TORN\n")
        while True:
            signal.pause()

    jsonl.write_all = write_all  # type: ignore[assignment]


async def write(log: str, seed: int, tear: int = 0, fd: int = 1) -> None:
    """The writer: prompt after prompt until killed (or :data:`MAX_ACKS` batches)."""
    if tear:
        tear_at(tear, fd)
    store = AckingStore(log, fd)
    try:
        async with Session.open(store, model=ScriptModel(seed), tools=tools(),
                                approver=approver, session_id=SESSION, create=True,
                                max_turns=1_000_000) as session:
            session.on_tool_call(guard)
            prompt = 0
            while store.acks < MAX_ACKS:
                prompt += 1
                await session.prompt(f"prompt {prompt}")
    finally:
        store.close()


def zygote() -> None:
    """Fork one writer per ``run LOG SEED TEAR`` line on stdin; report how each one ended."""
    for line in sys.stdin:
        command, log, seed, tear = line.split()
        assert command == "run", line
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the writer
            code = 0
            try:
                os.write(1, f"PID {os.getpid()}\n".encode())
                trio.run(write, log, int(seed), int(tear))
            except BaseException:  # noqa: BLE001 - report anything, then leave
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        how = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"code {os.WEXITSTATUS(status)}")
        print(f"EXIT {pid} {how}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        trio.run(write, sys.argv[2], int(sys.argv[3]), int((sys.argv[4:] or ["0"])[0]))
    else:
        zygote()
