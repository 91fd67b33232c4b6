"""``Session.run_sync``: a prompt from sync code, in a trio run of its own.

Plain ``def`` tests (the suite's trio_mode takes only ``async def`` ones): a script's thread,
which runs no loop; a notebook's, which runs asyncio's (:func:`in_a_kernel`: sync code called
from a coroutine on a loop of this thread, as Jupyter runs a cell, Ctrl-C left as Python's
``KeyboardInterrupt``); and trio code, where it is refused. Each checks what the caller gets: the prompt's result, its context variables in the
tools, exceptions as themselves, a conversation carried on through the log, and an interrupt
that cancels the prompt and leaves its calls recorded as cancelled.
"""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import trio

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, ModelMessage, ModelRequest, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ToolCallCancelled, UserMessage

SAFE = Annotations(read_only=True, open_world=False)
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="-")
T = TypeVar("T")


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def whoami(call: Any, ctx: Any) -> ToolResult:
    """Who the caller is, and which thread the tool ran in."""
    return ToolResult(content=[text(f"{WHO.get()} {threading.current_thread().name}")])


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def interrupting(call: Any, ctx: Any) -> ToolResult:
    """Interrupt the main thread (the notebook's interrupt button), then wait forever."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def read(store: MemoryStore, session_id: str) -> list[Any]:
    return trio.run(store.read, session_id)


def in_a_kernel(cell: Callable[[], T]) -> T:
    """``cell()``, called from a coroutine while an asyncio loop runs in this thread."""
    async def kernel() -> T:
        return cell()

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(kernel())
    finally:
        loop.close()


def test_a_prompt_from_a_script_runs_in_this_thread_and_the_conversation_goes_on() -> None:
    store = MemoryStore()
    model = FauxModel([faux_tool_call("whoami", {}), faux_text("first"), faux_text("second")])
    WHO.set("me")
    options: dict[str, Any] = {"model": model, "tools": [whoami], "approver": approve_all,
                               "session_id": "chat"}
    first = Session.run_sync(store, "who am I?", create=True, **options)
    assert (first.stop, first.text) == ("end_turn", "first")
    second = Session.run_sync(store, "and now?", **options)
    assert second.text == "second"
    records = read(store, "chat")
    said = [r.event.text for r in records if isinstance(r.event, UserMessage)]
    assert said == ["who am I?", "and now?"]
    # the second call reopened the session where the first left it: the model saw it all
    assert len(model.requests[-1].transcript) == len(model.requests[-2].transcript) + 2
    [outcome] = [r.event for r in records if getattr(r.event, "call_id", None) == "1.0"
                 and hasattr(r.event, "result")]
    assert outcome.result.content[0].text == f"me {threading.current_thread().name}"


def test_a_prompt_from_a_notebooks_running_loop_runs_trio_in_a_worker_thread() -> None:
    def cell() -> Any:  # sync code, called while asyncio's loop runs in this thread
        WHO.set("cell")
        model = FauxModel([faux_tool_call("whoami", {}), faux_text("done")])
        return Session.run_sync(MemoryStore(), "who am I?", model=model, tools=[whoami],
                                approver=approve_all), model

    result, model = in_a_kernel(cell)
    assert result.text == "done"
    [_, answered] = model.requests
    seen = answered.transcript[-1].result.content[0].text
    assert seen.split() == ["cell", "toolledger-run"]  # the caller's context, another thread


def test_an_exception_comes_out_as_itself_in_either_thread() -> None:
    raised = ValueError("the model is down")

    def fail(request: ModelRequest) -> ModelMessage:
        raise raised

    def prompt() -> None:
        Session.run_sync(MemoryStore(), "hello", model=FauxModel([fail]))

    with pytest.raises(ValueError) as caught:
        prompt()
    assert caught.value is raised
    with pytest.raises(ValueError) as caught:
        in_a_kernel(prompt)
    assert caught.value is raised


def in_a_script(cell: Callable[[], T]) -> T:
    """``cell()``, called where no event loop runs."""
    return cell()


@pytest.mark.parametrize("where", [in_a_script, in_a_kernel], ids=["script", "notebook"])
def test_an_interrupt_cancels_the_prompt_and_is_raised(
    where: Callable[[Callable[[], None]], None],
) -> None:
    store = MemoryStore()

    def cell() -> None:
        Session.run_sync(store, "go", model=FauxModel([faux_tool_call("interrupting", {})]),
                         tools=[interrupting], approver=approve_all, session_id="s",
                         create=True)

    with pytest.raises(KeyboardInterrupt):
        where(cell)
    # the run was cancelled before the interrupt went on: the call is closed in the log
    assert [r.event.call_id for r in read(store, "s")
            if isinstance(r.event, ToolCallCancelled)] == ["1.0"]


async def test_trio_code_is_told_to_await_the_session_instead() -> None:
    with pytest.raises(RuntimeError, match=r"this is trio code: .*await session.prompt"):
        Session.run_sync(MemoryStore(), "hello", model=FauxModel([faux_text("no")]))
