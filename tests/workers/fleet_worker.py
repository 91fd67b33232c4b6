"""One worker of the fleet: a process that runs session workflows (engine.hosts.dbos) on a
PostgreSQL database until it is killed.

    python -m tests.workers.fleet_worker URL RUNS_DIR CLAIM_SECONDS

The process imports everything once, then forks the workers its standard input asks for (a
worker started as a fresh interpreter would spend seconds importing, and the fleet test
starts one for every worker it kills): ``start EXECUTOR_ID`` and ``kill EXECUTOR_ID``
(SIGKILL). Each worker prints ``ready EXECUTOR_ID`` once it takes sessions; a kill prints
``killed EXECUTOR_ID`` once the worker is gone. At the end of its input it stops its workers
(SIGTERM) and exits.

The store and DBOS's system tables share the database ``URL``. Each session is scripted by
:class:`FleetModel`: turn 1 asks for ``charge`` (needs approval) and ``note`` (safe) at once,
turn 2 for ``ship`` (needs approval), turn 3 ends. Every tool body, as it starts, creates a
file of its own in ``RUNS_DIR`` named after the session, the call and the tool, so the test
counts the bodies that started outside the engine, whatever process ran them and whichever
died. """

from __future__ import annotations

import os
import signal
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import trio
from dbos import DBOS

from engine import Annotations, ToolResult, ToolSpec, text, tool
from engine.models import ModelMessage, ModelRequest
from engine.hosts.dbos import SessionWorker, listen
from events.stores.postgres import PostgresStore
from events.types import ModelToolCall

#: the application version every worker of the fleet pins (DBOS recovers only its own)
VERSION = "fleet-1"
#: the tool calls each session makes, by call id, and which of them ask for approval
CALLS = {"1.0": "charge", "1.1": "note", "2.0": "ship"}
APPROVED_BY_PERSON = ("1.0", "2.0")


class FleetModel:
    """Answers by the turn it is asked for, so any worker, at any point, goes on alike."""

    async def complete(self, request: ModelRequest) -> ModelMessage:
        def call(n: int, name: str) -> ModelToolCall:
            return ModelToolCall(id=f"t{request.turn}_{n}", name=name,
                                 arguments={"what": name})

        if request.turn == 1:
            return ModelMessage(text="", tool_calls=(call(0, "charge"), call(1, "note")),
                                stop_reason="tool_use")
        if request.turn == 2:
            return ModelMessage(text="", tool_calls=(call(0, "ship"),), stop_reason="tool_use")
        return ModelMessage(text="done", tool_calls=(), stop_reason="stop")


def tools(runs: Path) -> list[ToolSpec]:
    """``charge`` and ``ship`` change the world (approval asked), ``note`` only reads."""

    async def body(call: Any, ctx: Any) -> ToolResult:
        marker = runs / f"{ctx.session_id}+{call.call_id}+{call.name}+{uuid.uuid4().hex}"
        marker.touch(exist_ok=False)  # the body started: counted outside the engine
        await trio.sleep(0.005)  # some work, during which the worker may be killed
        return ToolResult(content=[text(f"{call.name} done")])

    schema = {"type": "object", "properties": {"what": {"type": "string"}}}
    danger = Annotations(destructive=True)
    return [tool(name="charge", input_schema=schema, annotations=danger)(body),
            tool(name="ship", input_schema=schema, annotations=danger)(body),
            tool(name="note", input_schema=schema,
                 annotations=Annotations(read_only=True, open_world=False))(body)]


def config(url: str, executor_id: str) -> Any:
    """The DBOS configuration of a fleet process (a worker, or the test's client side)."""
    return {"name": "toolledger-fleet", "system_database_url": url,
            "executor_id": executor_id, "application_version": VERSION,
            "sys_db_pool_size": 6, "notification_listener_polling_interval_sec": 0.05,
            "log_level": "WARNING"}


def work(url: str, runs: Path, executor_id: str, claim_seconds: float) -> None:
    """Be one worker, until SIGTERM (or SIGKILL)."""
    DBOS(config=config(url, executor_id))
    SessionWorker(lambda: PostgresStore(url, connections=1, claim_seconds=claim_seconds),
                  lambda session_id: FleetModel(), tools(runs), slots=4).install()
    DBOS.launch()
    listen(polling_seconds=0.05)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"ready {executor_id}", flush=True)
    stop.wait()
    DBOS.destroy()


def main(url: str, runs: Path, claim_seconds: float) -> None:
    """Follow the commands on the standard input: ``start EXECUTOR_ID`` forks a worker,
    ``kill EXECUTOR_ID`` kills it with SIGKILL and waits until it is gone; at the end of the
    input, stop the workers still running and wait for them."""
    children: dict[str, int] = {}
    for line in sys.stdin:
        command, executor_id = line.split()
        if command == "kill":
            pid = children.pop(executor_id)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            print(f"killed {executor_id}", flush=True)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                work(url, runs, executor_id, claim_seconds)
            finally:
                os._exit(0)
        children[executor_id] = pid
    for pid in children.values():
        os.kill(pid, signal.SIGTERM)
    for pid in children.values():
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]))
