"""A code-mode session in a process of its own, for the pause and resume tests: its program
gathers a read and a write, the write waits for an approval, and the process is killed there;
another process answers the approval and resumes.

    python -m tests.workers.code_worker pause STORE SESSION SIDE
    python -m tests.workers.code_worker resume STORE SESSION SIDE

STORE is a store URL (a JSONL path, ``sqlite:///...``, ``postgresql://...``), opened with a key,
so every record is sealed and every read verified. SIDE is a file each tool body appends a line
to, so a test can count how often a body ran. ``pause`` prints ``PAUSED`` once the prompt returned
paused (the program stopped with its state recorded), then kills itself (SIGKILL: no cleanup
runs); ``resume`` prints one JSON line: how the resume ended, the calls whose recorded program
state it loaded, and each call's status.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from engine import LATER, Annotations, Session, ToolResult, text, tool
from engine.codemode import CODE_TOOL, code_tool
from engine.codemode import program
from engine.models import FauxModel, ModelMessage, ModelRequest, faux_text, faux_tool_call
from events import SessionInUse
from events.stores.urls import open_store

KEY = b"code-mode-test-key-0123456789abc"

PROGRAM = """\
import asyncio
first = fetch(n=1)
second, written = await asyncio.gather(fetch_async(n=2), store_async(text="hello"))
print("fetched", first, second)
[first, second, written]
"""


#: The calls whose recorded program state this process loaded.
LOADED: list[str] = []


def counted_loads() -> None:
    """Count the states the sandbox is handed (each is checked first, here)."""
    checked = program.state_bytes

    def spy(event: Any, release: str) -> bytes:
        LOADED.append(event.call_id)
        return checked(event, release)

    program.state_bytes = spy  # type: ignore[assignment]


def tools(side: Path) -> list[Any]:
    @tool(annotations=Annotations(read_only=True, open_world=False), exposure="codemode")
    async def fetch(n: int) -> str:
        """Fetch item n."""
        with side.open("a") as f:
            f.write(f"fetch {n}\n")
        return f"item {n}"

    @tool(annotations=Annotations(destructive=True), exposure="codemode")
    async def store(text: str) -> str:
        """Store the text: needs approval."""
        with side.open("a") as f:
            f.write(f"store {text}\n")
        return f"stored {text}"

    return [fetch, store]


def answer(request: ModelRequest) -> ModelMessage:
    """The model's last word quotes what the program returned."""
    return ModelMessage(text=f"the program said: {request.transcript[-1].result.text}")


async def later(request: Any) -> Any:
    return LATER


def connect(url: str) -> Any:
    """The store, with the key; a PostgreSQL session's claim lasts a second without renewal,
    so that the resuming process can take over from the killed one soon."""
    if not url.startswith("postgresql"):
        return open_store(url, key=KEY)
    from events.stores.postgres import PostgresStore

    return PostgresStore(url, key=KEY, claim_seconds=1.0)


async def claimed_after_expiry(store: Any, session_id: str) -> None:
    """Wait until the killed process's claim on the session has run out (at most a few
    seconds: the database's clock decides)."""
    with trio.fail_after(30):
        while True:
            try:
                store.claim(session_id).release()
                return
            except SessionInUse:
                await trio.sleep(0.2)  # the claim expires by the server's clock; nobody tells


async def run(mode: str, url: str, session_id: str, side: Path) -> None:
    if mode == "pause":
        script: list[Any] = [faux_tool_call(CODE_TOOL, {"code": PROGRAM}), answer]
    else:
        script = [answer]
    with connect(url) as store:
        if url.startswith("postgresql") and mode == "pause":
            await store.init_schema()
        if mode == "resume":  # a killed owner's claim on a PostgreSQL session runs out first
            await claimed_after_expiry(store, session_id)
        async with Session.open(store, model=FauxModel(script), session_id=session_id,
                                create=mode == "pause", approver=later,
                                tools=[*tools(side), code_tool()]) as session:
            if mode == "resume":
                [pending] = session.state.pending_approvals
                await session.resolve_approval(pending, True)
                result = await session.resume()
                print(json.dumps({
                    "stop": result.stop,
                    "loaded": LOADED,
                    "statuses": {c: v.status for c, v in session.calls.items()},
                    "answer": session.transcript[-1].text,
                }), flush=True)
                return
            await session.activate(["fetch", "store"])
            # the program stops with its state recorded once the gathered read has ended and
            # the write waits for its approval; the prompt returns paused when it is written
            result = await session.prompt("go")
            assert result.stop == "paused", result
            print("PAUSED", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    counted_loads()
    trio.run(run, sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]))
