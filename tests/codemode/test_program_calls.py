"""A program's calls take the gate a model's call takes, and come back to the program as
values or exceptions; programs that fail or hit a limit end as error results, never the
session; the sandbox gets nothing of the host's but the tools."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from engine import Annotations, ApprovalRequest, Block, Session, ToolCallDraft, ToolResult, fold, text, tool
from engine.codemode import CODE_TOOL, CodeLimits, code_tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import ToolCallCancelled

from codemode_tools import CODEMODE, RAN, chat, secret

pytest.importorskip("pydantic_monty")


async def run(code: str, *, limits: CodeLimits | None = None, tools: Any = (),
              setup: Any = None, **kwargs: Any) -> tuple[Session, Any, list[Any]]:
    """One prompt whose model runs ``code``, then answers; the session's log is checked."""
    store = MemoryStore()
    model = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    all_tools = [*CODEMODE, *tools]
    async with Session.open(store, model=model, tools=[*all_tools, code_tool(limits=limits)],
                            **kwargs) as session:
        if setup is not None:
            setup(session)
        await session.activate([t.name for t in all_tools if t.exposure == "codemode"])
        await session.prompt("go")
        records = await store.read(session.session_id)
        check_log(records, state=session.state, transcript=session.transcript, closed=False,
                  **({"rules": kwargs["rules"]} if "rules" in kwargs else {}))
    assert fold(records).snapshot() == session.state.snapshot()
    assert session.transcript[-1].text == "done"  # the session went on to the model's answer
    top = next(c for c in session.state.calls.values() if c.name == CODE_TOOL)
    return session, top, records


def value(top: Any) -> Any:
    assert top.status == "completed", top.result
    return top.result.structured_content["result"]


# -- the gate -------------------------------------------------------------------------------

async def test_a_destructive_tool_needs_approval_from_code_as_directly() -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments["path"] == "a"

    code = ("out = [wipe(path='a')]\n"
            "try:\n    wipe(path='b')\nexcept PermissionError as e:\n    out.append(str(e))\n"
            "out")
    RAN.clear()
    session, top, _ = await run(code, approver=approver)
    assert value(top) == ["wiped a", "wipe was not approved"]
    assert [(r.name, r.origin, r.call_id) for r in asked] == [
        ("wipe", "nested", f"{top.call_id}/0"), ("wipe", "nested", f"{top.call_id}/1")]
    assert RAN["wipe a"] == 1 and RAN["wipe b"] == 0


async def test_handlers_see_program_calls_and_a_block_is_a_permission_error() -> None:
    seen: list[tuple[str, str | None]] = []

    def spy(draft: ToolCallDraft) -> Block | None:
        seen.append((draft.name, draft.parent_id))
        return Block("not today") if draft.name == "shout" else None

    code = ("try:\n    shout(word='x')\nexcept PermissionError as e:\n    r = 'blocked: ' + str(e)\n"
            "[double(n=1)['double'], r]")
    session, top, _ = await run(code, setup=lambda s: s.on_tool_call(spy))
    assert value(top)[0] == 2 and value(top)[1].startswith("blocked: ")
    assert (("shout", top.call_id) in seen) and (("double", top.call_id) in seen)


async def test_invalid_arguments_and_a_raising_tool_are_runtime_errors() -> None:
    code = ("out = []\n"
            "for f in (lambda: double(n='x'), lambda: double(1, 2), lambda: boom()):\n"
            "    try:\n        f()\n    except RuntimeError as e:\n        out.append('R')\n"
            "    except TypeError as e:\n        out.append('T')\n"
            "out")
    session, top, _ = await run(code)
    assert value(top) == ["R", "T", "R"]
    statuses = [session.calls[c].status for c in session.state.children(top.call_id)]
    assert statuses == ["failed", "failed"]  # double(1, 2) was refused before any call


async def test_gathered_calls_run_at_the_same_time() -> None:
    met = trio.Event()

    @tool(annotations=Annotations(read_only=True), exposure="codemode")
    async def ping() -> str:
        """Waits for pong."""
        with trio.fail_after(5):
            await met.wait()
        return "ping"

    @tool(annotations=Annotations(read_only=True), exposure="codemode")
    async def pong() -> str:
        """Lets ping go."""
        met.set()
        return "pong"

    code = "import asyncio\nawait asyncio.gather(ping_async(), pong_async())"
    session, top, _ = await run(code, tools=[ping, pong])
    assert value(top) == ["ping", "pong"]
    assert [session.calls[c].name for c in session.state.children(top.call_id)] == [
        "ping", "pong"]


# -- failures and limits are results --------------------------------------------------------

@pytest.mark.parametrize(("code", "error", "says"), [
    ("print('before')\ndef (:", "syntax", "SyntaxError"),
    ("print('before')\nraise ValueError('bad input')", "raised", "ValueError: bad input"),
    ("print('before')\nwhile True:\n    pass", "raised", "TimeoutError"),
    ("print('before')\nx = []\nwhile True:\n    x.append('a' * 100000)", "raised", "MemoryError"),
    ("print('before')\ndef f(n):\n    return f(n + 1)\nf(0)", "raised", "RecursionError"),
    ("print('before')\nfor i in range(50):\n    double(n=i)", "raised", "suspension limit"),
])
async def test_a_failing_program_is_an_error_result_with_its_output(
        code: str, error: str, says: str) -> None:
    limits = CodeLimits(duration=0.5, memory=20_000_000, suspensions=10)
    session, top, _ = await run(code, limits=limits)
    assert top.status == "completed" and top.result.is_error
    content = top.result.structured_content
    assert content["error"] == error and says in content["message"]
    if error != "syntax":
        assert content["printed"] == "before\n"
        assert "Printed output:\nbefore" in top.result.text


async def test_printed_output_is_bounded() -> None:
    session, top, _ = await run("for i in range(1000):\n    print('line', i)\n1",
                                limits=CodeLimits(output=50))
    printed = top.result.structured_content["printed"]
    assert printed.startswith("line 0\nline 1\n") and len(printed) < 120
    assert "more characters of output were cut" in printed


async def test_calls_a_failed_program_did_not_wait_for_are_closed() -> None:
    never = trio.Event()

    @tool(annotations=Annotations(read_only=True), exposure="codemode")
    async def slow() -> str:
        """Never ends by itself."""
        await never.wait()
        return "late"

    session, top, records = await run("import asyncio\nt = slow_async()\nraise ValueError('x')",
                                      tools=[slow])
    [child] = session.state.children(top.call_id)
    assert session.calls[child].status == "cancelled"
    assert any(isinstance(r.event, ToolCallCancelled) and r.event.call_id == child
               for r in records)


# -- what the sandbox gets ------------------------------------------------------------------

@pytest.mark.parametrize("attempt", [
    "open('/etc/passwd').read()",
    "from pathlib import Path\nPath('/etc/hostname').read_text()",
    "import os\nos.environ['HOME']",
    "import os\nos.getenv('HOME')",
    "import time\ntime.time()",
    "import datetime\ndatetime.datetime.now()",
    "import socket",
    "import subprocess",
    "import urllib.request",
])
async def test_the_sandbox_has_no_files_network_environment_or_clock(attempt: str) -> None:
    code = ("try:\n" + "".join(f"    {line}\n" for line in attempt.splitlines())
            + "    r = 'allowed'\nexcept Exception as e:\n    r = 'refused: ' + type(e).__name__\nr")
    session, top, _ = await run(code)
    assert value(top).startswith("refused: ")


@pytest.mark.parametrize("name", ["secret", "chat", "secret_async", "run_code", "wipe_"])
async def test_hidden_and_model_only_tools_are_not_callable_from_code(name: str) -> None:
    RAN.clear()
    code = f"try:\n    {name}()\n    r = 'called'\nexcept NameError as e:\n    r = 'NameError'\nr"
    session, top, _ = await run(code, tools=[secret, chat])
    assert value(top) == "NameError"
    assert session.state.children(top.call_id) == ()
    assert RAN["secret"] == RAN["chat"] == 0
