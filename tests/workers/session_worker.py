"""A session in a process of its own, for the resume tests: it stops where a test wants it to
(paused for an approval, or killed while a tool runs), and another process takes over.

    python -m tests.workers.session_worker pause LOG SIDE
    python -m tests.workers.session_worker resume LOG SIDE
    python -m tests.workers.session_worker hang LOG SIDE idempotent|plain
    python -m tests.workers.session_worker hold LOG SIDE idempotent|plain
    python -m tests.workers.session_worker finish LOG SIDE idempotent|plain

LOG is the JSONL log, SIDE a file each tool body appends a line to (so a test can count how
often a body ran). Every run prints one JSON line describing how its prompt or resume ended,
or, if the session could not be opened because another process has it, ``{"error": ...}``
(and exits with status 3). ``hang`` and ``hold`` print ``STARTED`` once the tool's body runs;
``hang``'s body never ends, ``hold``'s ends when a line arrives on the worker's stdin.
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from engine import LATER, Annotations, PromptResult, Session, ToolResult, text, tool
from engine.models import FauxModel, FauxStep, faux_text, faux_tool_call
from events import JsonlStore, SessionInUse

SESSION = "worker-session"


def tools(side: Path, *, idempotent: bool = False, hang: bool = False,
          hold: bool = False) -> list[Any]:
    @tool(input_schema={"type": "object", "properties": {"text": {"type": "string"}},
                        "required": ["text"]},
          annotations=Annotations(destructive=True))
    async def write_note(call: Any, ctx: Any) -> ToolResult:
        """Append a note (a side effect)."""
        with side.open("a") as f:
            f.write(f"write_note {call.call_id} {call.arguments['text']}\n")
        return ToolResult(content=[text("noted")])

    @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=idempotent))
    async def slow_step(call: Any, ctx: Any) -> ToolResult:
        """A step that takes a while."""
        with side.open("a") as f:
            f.write(f"slow_step {call.call_id}\n")
        if hang or hold:
            print("STARTED", flush=True)
        if hang:
            await trio.sleep_forever()
        if hold:  # until the test says go on
            await trio.to_thread.run_sync(sys.stdin.readline)
        return ToolResult(content=[text("step done")])

    return [write_note, slow_step]


async def later(request: Any) -> Any:
    return LATER


def report(result: PromptResult, session: Session) -> None:
    print(json.dumps({
        "stop": result.stop,
        "pending": [r.call_id for r in result.pending],
        "statuses": {cid: view.status for cid, view in session.calls.items()},
        "transcript": len(session.transcript),
    }), flush=True)


async def run(mode: str, log: Path, side: Path, flavour: str) -> None:
    idempotent = flavour == "idempotent"
    script: list[FauxStep]
    if mode == "pause":
        script = [faux_tool_call("write_note", {"text": "hello"}), faux_text("done")]
    elif mode in ("hang", "hold"):
        script = [faux_tool_call("slow_step", {}), faux_text("done")]
    else:  # resume, finish: the model is asked only for what comes after the batch
        script = [faux_text("done")]
    model = FauxModel(script)
    with JsonlStore(log) as store:
        async with Session.open(store, model=model, session_id=SESSION, approver=later,
                                create=mode in ("pause", "hang", "hold"),
                                tools=tools(side, idempotent=idempotent, hang=mode == "hang",
                                            hold=mode == "hold")) as session:
            if mode in ("pause", "hang", "hold"):
                result = await session.prompt("go")
            else:
                if mode == "resume":
                    await session.resolve_approval("1.0", True)
                result = await session.resume()
            report(result, session)


if __name__ == "__main__":
    mode, log, side = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    flavour = sys.argv[4] if len(sys.argv) > 4 else "plain"
    try:
        trio.run(partial(run, mode, log, side, flavour))
    except SessionInUse as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
        sys.exit(3)
