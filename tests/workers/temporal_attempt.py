"""The first attempt of the Temporal recipe's ``run_prompt`` activity, in a process that dies
in the middle of a tool's body, as a worker does when it is killed.

    python -m tests.workers.temporal_attempt DIR

The session lives in ``DIR/sessions.sqlite``; each run of a tool body appends its name to
``DIR/runs.txt``, so the process that retries the activity sees what ran before. ``lookup``
ends the process (``os._exit``) the first time it runs: the log then ends with its body
started and no result, exactly what a killed worker leaves.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from engine import Annotations, ToolResult, ToolSpec, text, tool
from engine.hosts.temporal import PromptRequest, SessionActivities
from engine.models import FauxModel, faux_text, faux_tool_call
from events import SqliteStore

REQUEST = PromptRequest(session_id="wf-retried", number=1, text="charge, then look up")


def tools(directory: Path) -> list[ToolSpec]:
    """``charge`` (never to run twice) and ``lookup`` (idempotent; the first run dies)."""
    runs = directory / "runs.txt"

    def ran(name: str) -> int:
        with runs.open("a") as file:
            file.write(name + "\n")
        return runs.read_text().split().count(name)

    @tool(input_schema={"type": "object"},
          annotations=Annotations(destructive=False, open_world=False))
    async def charge(call: Any, ctx: Any) -> ToolResult:
        """Not idempotent: must never run twice."""
        ran("charge")
        return ToolResult(content=[text("charged")])

    @tool(input_schema={"type": "object"},
          annotations=Annotations(read_only=True, open_world=False, idempotent=True))
    async def lookup(call: Any, ctx: Any) -> ToolResult:
        """Idempotent; the worker dies the first time it runs."""
        if ran("lookup") == 1:
            sys.stdout.flush()
            os._exit(3)
        return ToolResult(content=[text("found")])

    return [charge, lookup]


def main(directory: Path) -> None:
    model = FauxModel([faux_tool_call("charge", {}), faux_tool_call("lookup", {}),
                       faux_text("all done")])
    acts = SessionActivities(lambda: SqliteStore(directory / "sessions.sqlite"),
                             lambda session_id: model, tools(directory))
    env = ActivityEnvironment()
    env.on_heartbeat = lambda seq: print("heartbeat", seq, flush=True)
    env.run(acts.run_prompt, REQUEST)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
