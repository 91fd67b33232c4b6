"""The state machine of engine.testing: it drives live sessions through every step a host
takes and checks every invariant after each; it finds what breaks them, in the engine's store
or in a user's handler; and a subclass with a user's own tools is a few lines."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import invariant, run_state_machine_as_test

from engine import Annotations, Block, PolicyRules, ToolCallDraft, ToolResult, text, tool
from engine.testing import SessionMachine
from events import MemoryStore, Record


def machine_settings(fraction: int = 2, steps: int = 25) -> settings:
    """A fraction of the profile's examples (tests/conftest.py), each a run of ``steps``."""
    return settings(max_examples=max(10, settings.default.max_examples // fraction),
                    stateful_step_count=steps, deadline=None,
                    suppress_health_check=list(HealthCheck))


# -- the catalogue: drawn annotations, rules, handlers and approvers ---------------------------


class CatalogueMachine(SessionMachine):
    """The machine as it comes: the catalogue of tools that do everything a tool can do."""


TestCatalogueMachine = CatalogueMachine.TestCase
TestCatalogueMachine.settings = machine_settings()


def test_the_machine_asks_questions_beside_approvals_and_answers_them_at_pauses() -> None:
    seen: dict[str, set[str]] = {"asked": set(), "later": set(), "approved_later": set()}

    class Watching(SessionMachine):
        ask_tool_name = "ask"
        answers = ("later",)           # every approval and every question waits for the host
        question_answers = ("later",)

        def make_tools(self) -> list[Any]:
            return note_tools({})

        @invariant()
        def note_questions(self) -> None:
            seen["asked"].update(self.questioned)
            for record in self.records:
                event = record.event
                if type(event).__name__ == "QuestionAnswered" and event.later:
                    seen["later"].add(event.question_id)
                if type(event).__name__ == "ApprovalResolved" and event.later:
                    seen["approved_later"].add(event.call_id)

    run_state_machine_as_test(Watching, settings=settings(
        machine_settings(fraction=1, steps=25), max_examples=30, derandomize=True,
        database=None, phases=[Phase.generate]))
    # questions were put to the asker and answered by the host at a pause, as approvals were
    assert seen["asked"] and seen["later"] and seen["approved_later"], seen


# -- a user's machine: a few lines --------------------------------------------------------------

NOTE = {
    "type": "object",
    "properties": {"name": {"enum": ["todo", "ideas", "secrets"]}, "text": {"type": "string"}},
    "required": ["name"],
    "additionalProperties": False,
}


def note_tools(notes: dict[str, str]) -> list[Any]:
    @tool(input_schema=NOTE, annotations=Annotations(read_only=True, open_world=False))
    async def read_note(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text(notes.get(call.arguments["name"], ""))])

    @tool(input_schema=NOTE, annotations=Annotations(destructive=False, open_world=False))
    async def write_note(call: Any, ctx: Any) -> ToolResult:
        notes[call.arguments["name"]] = call.arguments.get("text", "")
        return ToolResult(content=[text("saved")])

    @tool(input_schema=NOTE, annotations=Annotations(destructive=True, open_world=False))
    async def delete_note(call: Any, ctx: Any) -> ToolResult:
        notes.pop(call.arguments["name"], None)
        return ToolResult(content=[text("deleted")])

    return [read_note, write_note, delete_note]


def guard_secrets_of_the_model_only(draft: ToolCallDraft) -> Block | None:
    # the bug: a nested call (a tool calling write_note) is not checked
    if draft.origin == "model" and draft.arguments.get("name") == "secrets":
        return Block("the secrets note is off limits")
    return None


def guard_secrets(draft: ToolCallDraft) -> Block | None:
    if isinstance(draft.arguments, dict) and draft.arguments.get("name") == "secrets":
        return Block("the secrets note is off limits")
    return None


class NotesMachine(SessionMachine):
    call_handlers = [guard_secrets]
    policy = PolicyRules(allow=["read_note"])
    # an approver's edit is validated, not put to the tool_call handlers (docs/handlers.md): a
    # person who edits a call to name the secrets note has decided to, which no guard undoes
    edits = False

    def make_tools(self) -> list[Any]:
        self.notes: dict[str, str] = {}
        return note_tools(self.notes)

    @invariant()
    def secrets_untouched(self) -> None:
        assert "secrets" not in self.notes, "a call wrote the secrets note"


TestNotesMachine = NotesMachine.TestCase
TestNotesMachine.settings = machine_settings(fraction=4)


def test_the_machine_finds_a_handler_that_nested_calls_get_past() -> None:
    class LeakyNotesMachine(NotesMachine):
        call_handlers = [guard_secrets_of_the_model_only]

    # (the leak is only reachable through the nesting tool's plans now that the approver does
    # not edit: 300 examples, enough when an edit could also write the note, no longer are)
    with pytest.raises(AssertionError, match="a call wrote the secrets note"):
        run_state_machine_as_test(LeakyNotesMachine, settings=settings(
            machine_settings(fraction=1, steps=10), max_examples=600, derandomize=True,
            database=None, phases=[Phase.generate]))


# -- the machine checks the engine's invariants after every step --------------------------------


class LosingStore(MemoryStore):
    """A store that drops the second record of each session (a tool's registration) when it
    reads it back."""

    async def read(self, session_id: str, after: int = 0) -> list[Record]:
        return [r for r in await super().read(session_id, after) if r.seq != 2]


def test_the_machine_checks_the_store_holds_what_the_session_recorded() -> None:
    class Losing(NotesMachine):
        def make_store(self) -> MemoryStore:
            return LosingStore()

    with pytest.raises(AssertionError, match="record 2 differs between the session and its store"):
        run_state_machine_as_test(Losing, settings=settings(
            machine_settings(fraction=1, steps=10), max_examples=50, derandomize=True,
            database=None, phases=[Phase.generate]))


def test_an_approver_given_as_a_plain_function_is_used_as_it_is() -> None:
    asked: list[str] = []

    async def grant(request: Any) -> bool:
        asked.append(request.name)
        return True

    class Approving(SessionMachine):
        tools = note_tools({})
        approver = grant  # a plain function, not a method

    run_state_machine_as_test(Approving, settings=settings(
        machine_settings(fraction=1, steps=8), max_examples=20, derandomize=True,
        database=None, phases=[Phase.generate]))
    assert asked, "the machine never asked the class's approver"
    # the one tool that needs approval as registered (a drawn new version of another tool
    # may need it too)
    assert "delete_note" in asked


# -- the loop the machine drives trio with ----------------------------------------------------


def test_a_step_returns_its_result_or_raises_its_exception() -> None:
    from engine.testing.loop import LoopThread

    loop = LoopThread()
    try:
        async def answer(x: int) -> int:
            await trio.sleep(3)  # virtual: no real time passes
            return x + 1

        async def fail() -> None:
            raise ValueError("from the loop")

        assert loop.step(answer, 41) == 42
        with pytest.raises(ValueError, match="from the loop"):
            loop.step(fail)
        assert loop.step(answer, 1) == 2  # the loop survives a failed step
    finally:
        loop.close()


def test_a_step_ends_only_when_the_loop_is_idle_and_time_moves_only_in_steps() -> None:
    from engine.testing.loop import LoopThread

    loop = LoopThread()
    seen: list[str] = []
    try:
        async def start() -> None:
            async def background() -> None:
                for _ in range(5):
                    await trio.lowlevel.checkpoint()
                seen.append("checkpoints done")
                await trio.sleep(10)
                seen.append("slept")

            loop.nursery.start_soon(background)

        loop.step(start)
        # the step waited for the background task to block: its checkpoints are done, and
        # its sleep has not ended (the clock does not move between steps)
        assert seen == ["checkpoints done"]
        async def now() -> float:
            return trio.current_time()

        assert loop.step(now) == 0.0
        assert seen == ["checkpoints done"]
        loop.step(trio.sleep, 20)
        assert seen == ["checkpoints done", "slept"]
    finally:
        loop.close()


def test_a_step_that_waits_forever_fails_as_hung() -> None:
    from engine.testing.loop import LoopThread, StepHung

    loop = LoopThread(step_timeout=30)
    try:
        with pytest.raises(StepHung, match="did not finish within 30 s of virtual time"):
            loop.step(trio.sleep_forever)
    finally:
        loop.close()
