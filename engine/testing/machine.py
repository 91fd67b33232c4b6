"""A Hypothesis state machine that drives a live :class:`~engine.Session` step by step.

:class:`SessionMachine` keeps one session open on a store between steps and, at each step,
does what a host does: prompt with a scripted batch (calls drawn from the tools' own input
schemas, valid and invalid, unknown tools, nested plans, parallel batches), cancel a prompt
part-way (after a drawn number of records), resolve a pending approval (granted or refused,
once or for the session, sometimes with edited arguments), answer a tool's pending question
(accept, decline or cancel; content that does not fit is refused), resume, change the active tools,
register a new version of a tool (other annotations, maybe another exposure), try what must
be refused (a prompt while paused, an answer to a call that waits for nothing), call a tool
as the host (in a task of its own, beside the prompts: it may wait for an approval, or outlive
a restart and be taken up again with ``resume_call``), and restart (close the session and open
it again from its log). After every step it checks every
invariant of :mod:`engine.testing.invariants` on the store's log and the live session.

Subclass it with your own tools, handlers, policy and approver; a few class attributes do::

    class NotesMachine(SessionMachine):
        tools = note_tools({})
        call_handlers = [guard_secrets]
        policy = PolicyRules(allow=["read_note"])

    TestNotes = NotesMachine.TestCase

Without tools of its own the machine runs the catalogue of :mod:`engine.testing.catalogue`,
with drawn annotations, policy rules and handlers.

How it drives trio: the machine is synchronous, the session lives in a trio loop in a helper
thread (:class:`~engine.testing.loop.LoopThread`); each step hands one async function to the
loop and returns once the loop is idle again, so the state machine reads the session with no
race. Time is virtual (``MockClock``), and moves only during steps.

The machine's settings, hooks and the check after every step are
:class:`~engine.testing.machinebase.SessionMachineBase`; here are its rules, the steps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ..core.callids import host_call_id
from ..core.errors import InvalidAnswer, QuestionNotPending
from ..core.policy import PolicyRules
from ..core.questions import Action
from ..core.toolcontext import CallOutcome
from ..core.tools import EXPOSURES, ToolSpec
from ..models import FauxStep, faux_text
from ..runtime.session import PromptResult, Session
from .catalogue import TOOL_NAMES, ask_tool, catalogue_tools, nest_tool
from .host import MACHINE_ANSWERS, ScriptModel, drive
from .machinebase import SessionMachineBase, class_attribute
from .scripts import (
    call_handler_specs,
    make_call_handler,
    make_result_handler,
    policy_rules,
    result_handler_specs,
)
from .strategies import tool_annotations
from .tools import counted

__all__ = ["MACHINE_ANSWERS", "ScriptModel", "SessionMachine"]  # the first two from .host

SCOPES: tuple[Literal["once", "session"], ...] = ("once", "session")


class SessionMachine(SessionMachineBase):
    """Drives a :class:`~engine.Session` step by step and checks every invariant after each
    step. Subclass it; set what you need:

    ``tools``
        Your :class:`~engine.ToolSpec`\\ s (each body is counted). Empty: the catalogue.
    ``call_handlers`` / ``result_handlers``
        ``tool_call`` and ``tool_result`` handlers, installed in order.
    ``policy``
        The session's :class:`~engine.PolicyRules` (the invariants recompute the policy
        with them).
    ``approver``
        An approver; ``None`` (default): one that answers as each prompt step drew it per
        tool (grant, deny, once or for the session, edit the arguments, raise, or
        :data:`~engine.LATER`, which leaves the approval to the resolve step).
    ``nest_tool_name``
        The name of a tool the machine adds that makes nested calls to your tools (from a
        drawn plan); ``None``: no such tool.
    ``ask_tool_name``
        The name of a tool the machine adds that asks the person (``ctx.ask``), answered by
        the machine's asker (drawn at each prompt: accept, decline, cancel, content that does
        not fit, raise, or :data:`~engine.LATER`, which leaves the question to the
        ``answer_question`` step); ``None`` (default): none beside your tools. The catalogue
        always has one, ``ask``.
    ``asker``
        An asker; ``None`` (default): the machine's own, as above.

    Or override the hooks: :meth:`make_tools` (fresh tools per run), :meth:`make_store`,
    :meth:`setup_session` (called after each open), :meth:`model_calls` (what the model
    calls). Add rules and invariants of your own with Hypothesis' decorators; inside them,
    :meth:`run` runs an async function in the session's loop, and ``self.session``,
    ``self.store``, ``self.runs`` (body runs) and ``self.records`` (the log at the last
    check) are there to read.
    """

    # -- rules --------------------------------------------------------------------------------

    @initialize(data=st.data())
    def open_session(self, data: st.DataObject) -> None:
        """Build the tools (the catalogue, with drawn annotations, rules and handlers, when
        the subclass brings none) and open the session."""
        tools = list(self.make_tools())
        if tools:
            self._specs = [counted(spec, self.runs) for spec in tools]
            if self.nest_tool_name is not None and all(s.name != self.nest_tool_name
                                                      for s in tools):
                self._specs.append(nest_tool(self.runs, name=self.nest_tool_name,
                                             record=self.nested))
        else:
            notes = tool_annotations(titles=False)
            drawn = data.draw(st.fixed_dictionaries({name: notes for name in TOOL_NAMES}),
                              label="annotations")
            self._specs = catalogue_tools(drawn, self.runs, record=self.nested)
            self.policy = data.draw(policy_rules(), label="policy")
            self._call_handlers = [make_call_handler(i, spec) for i, spec in enumerate(
                data.draw(st.lists(call_handler_specs, max_size=2), label="call handlers"))]
            self._result_handlers = [make_result_handler(spec) for spec in data.draw(
                st.lists(result_handler_specs, max_size=1), label="result handlers")]
        asking = self.ask_tool_name if tools else (self.ask_tool_name or "ask")
        if asking is not None and all(spec.name != asking for spec in self._specs):
            self._specs.append(ask_tool(self.runs, name=asking))
        self._calls = self.model_calls()
        self.run(self._open)

    @precondition(lambda self: not self.batch_open())
    @rule(data=st.data())
    def prompt(self, data: st.DataObject) -> None:
        """Prompt with a script of one or more batches, maybe cancelled part-way."""
        turns = data.draw(st.lists(st.lists(self._calls, min_size=1, max_size=self.max_calls),
                                   min_size=1, max_size=self.max_turns), label="batches")
        self._draw_answers(data)
        cancel_at = self._draw_cancel(data)
        steps: list[FauxStep] = [*turns, faux_text("done")]
        self.model.load(steps)
        self._drive(lambda: self.live.prompt("go"), cancel_at)

    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        """Resume: finish the batch with what the log holds, then go on with the script."""
        cancel_at = self._draw_cancel(data)
        self._drive(self.live.resume, cancel_at)

    @precondition(lambda self: bool(self.pending()))
    @rule(data=st.data())
    def resolve(self, data: st.DataObject) -> None:
        """Answer one pending approval, as a host does."""
        request = data.draw(st.sampled_from(self.pending()), label="request")
        granted = data.draw(st.booleans(), label="granted")
        scope = data.draw(st.sampled_from(SCOPES), label="scope")
        arguments = data.draw(st.one_of(st.none(), st.none(), self._arguments(request.name)),
                              label="edited arguments") if granted and self.edits else None
        self.run(partial(self.live.resolve_approval, request.call_id, granted, scope,
                         arguments=arguments))

    @precondition(lambda self: bool(self.pending_questions()))
    @rule(data=st.data())
    def answer_question(self, data: st.DataObject) -> None:
        """Answer one pending question, as a host does: accept (with content that fits its
        form, or content that does not, which is refused and records nothing), decline or
        cancel."""
        question = data.draw(st.sampled_from(self.pending_questions()), label="question")
        actions: tuple[Action, ...] = ("accept", "accept", "decline", "cancel")
        action = data.draw(st.sampled_from(actions), label="action")
        contents: st.SearchStrategy[dict[str, Any]] = st.one_of(
            st.integers(0, 9).map(lambda n: {"count": n}),
            st.sampled_from([{}, {"count": -1}, {"count": "x"}]))
        content = data.draw(contents, label="content") if action == "accept" else None
        misfit = content is not None and not (isinstance(content.get("count"), int)
                                              and content["count"] >= 0)
        before = len(self.live.records)

        async def answer() -> None:
            try:
                await self.live.answer_question(question.question_id, action, content)
            except InvalidAnswer:
                if misfit:
                    return
                raise
            if misfit:
                raise AssertionError(f"answer_question accepted {content!r}, which does not "
                                     f"fit the form")

        self.run(answer)
        if misfit:
            assert len(self.live.records) == before, "a refused answer recorded something"

    @rule(data=st.data())
    def answer_a_question_that_waits_for_nothing(self, data: st.DataObject) -> None:
        """An answer to a question that does not wait is refused, and records nothing."""
        waiting = {q.question_id for q in self.pending_questions()}
        state = self.live.state
        known = [q.question_id for call in state.calls.values() for q in call.questions
                 if q.question_id not in waiting]
        question_id = data.draw(st.sampled_from([*known, "9.9#1", "1.0#9"]), label="question")
        before = len(self.live.records)

        async def attempt() -> None:
            try:
                await self.live.answer_question(question_id, "decline")
            except QuestionNotPending:
                return
            raise AssertionError(f"an answer to {question_id}, which waits for nothing, "
                                 f"was accepted")

        self.run(attempt)
        assert len(self.live.records) == before, "a refused answer recorded something"

    @precondition(lambda self: bool(self.batch_open()))
    @rule()
    def prompt_while_paused_is_refused(self) -> None:
        """A prompt while a batch is open is refused, and records nothing."""
        before = len(self.live.records)

        async def attempt() -> None:
            try:
                await self.live.prompt("too soon")
            except RuntimeError:
                return
            raise AssertionError("a prompt was accepted while the last batch was open")

        self.run(attempt)
        assert len(self.live.records) == before, "a refused prompt recorded something"

    @rule(data=st.data())
    def answer_what_waits_for_nothing(self, data: st.DataObject) -> None:
        """An answer to a call that waits for no approval is refused, and records nothing."""
        waiting = {request.call_id for request in self.pending()}
        known = [c for c in self.live.state.calls if c not in waiting]
        call_id = data.draw(st.sampled_from([*known, "9.9", "no-such-call"]), label="call id")
        before = len(self.live.records)

        async def attempt() -> None:
            try:
                await self.live.resolve_approval(call_id, True)
            except ValueError:
                return
            raise AssertionError(f"an answer to {call_id}, which waits for nothing, was accepted")

        self.run(attempt)
        assert len(self.live.records) == before, "a refused answer recorded something"

    @rule(data=st.data())
    def activate(self, data: st.DataObject) -> None:
        """Add drawn tools to the active set (``session.activate``; hidden ones included)."""
        names = [spec.name for spec in self._specs]
        chosen = data.draw(st.lists(st.sampled_from(names), max_size=3), label="names")
        before = self.live.state.active_tools
        self.run(self.live.activate, chosen)
        assert self.live.state.active_tools == before | set(chosen), "activate lost a tool"

    @rule(data=st.data())
    def set_active_tools(self, data: st.DataObject) -> None:
        """Replace the active tools with a drawn list (hidden ones included); a list with an
        unknown name is refused and changes nothing."""
        names = [spec.name for spec in self._specs]
        chosen = data.draw(st.lists(st.sampled_from(names), max_size=len(names)), label="names")
        unknown = data.draw(st.sampled_from([False] * 5 + [True]), label="with an unknown name")
        if unknown:
            chosen = [*chosen, "no_such_tool"]
        before = len(self.live.records)

        async def change() -> None:
            try:
                await self.live.set_active_tools(chosen)
            except ValueError:
                if unknown:
                    return
                raise
            if unknown:
                raise AssertionError("set_active_tools accepted an unknown name")

        self.run(change)
        if unknown:
            assert len(self.live.records) == before, (
                "a refused set_active_tools recorded something")

    @rule(data=st.data())
    def register_a_new_version(self, data: st.DataObject) -> None:
        """Register a new version of a tool: other annotations, maybe another exposure (the
        policy and the exposure rules must follow the new version from then on)."""
        index = data.draw(st.integers(0, len(self._specs) - 1), label="tool")
        spec = self._specs[index]
        notes = data.draw(tool_annotations(titles=False), label="annotations")
        exposure = data.draw(st.sampled_from([spec.exposure] * 3 + list(EXPOSURES)),
                             label="exposure")
        newer = attrs.evolve(spec, annotations=notes, exposure=exposure)
        self._specs[index] = newer  # a restart registers this version too
        self.run(self.live.register, newer)

    @rule(data=st.data())
    def host_call(self, data: st.DataObject) -> None:
        """The host calls a tool (drawn like the model's calls) in a task of its own, which
        may wait for an approval, run beside a paused batch, or outlive a restart."""
        call = data.draw(self._calls, label="host call")
        call_id = host_call_id(self.live.state.host_calls)  # call_tool names it so
        self._carried.add(call_id)
        self.run(self._start_host, call_id, partial(self.live.call_tool, call.name,
                                                     call.arguments))

    def _open_host_calls(self) -> list[str]:
        if self.session is None:
            return []
        calls = self.session.state.live_calls
        return [c for c in self.session.state.open_calls
                if calls[c].origin == "host" and c not in self._carried]

    @precondition(lambda self: bool(self._open_host_calls()))
    @rule(data=st.data())
    def resume_a_host_call(self, data: st.DataObject) -> None:
        """Take up a host call a restart left open (``resume_call``), in a task of its own."""
        call_id = data.draw(st.sampled_from(self._open_host_calls()), label="host call")
        self._carried.add(call_id)
        self.run(self._start_host, call_id, partial(self.live.resume_call, call_id))

    async def _start_host(self, call_id: str, call: Callable[[], Awaitable[CallOutcome]]) -> None:
        self._loop.nursery.start_soon(self._host_task, call_id, call)

    async def _host_task(self, call_id: str, call: Callable[[], Awaitable[CallOutcome]]) -> None:
        try:
            outcome = await call()
        except RuntimeError as exc:
            if not str(exc).startswith("the session closed while host call"):
                self._host_raised.append(exc)  # the invariants report it
            return  # a restart: the call stays open in the log
        except Exception as exc:
            self._host_raised.append(exc)
            return
        finally:
            self._carried.discard(call_id)
        self.host_outcomes[outcome.call_id] = outcome

    @rule()
    def restart(self) -> None:
        """Close the session (calls in flight stop without a word, as if the process stopped)
        and open it again from its log."""
        self.run(self._held.close)
        self.run(self._open)

    def _draw_answers(self, data: st.DataObject) -> None:
        if class_attribute(type(self), "asker") is None:
            self._question_answer = data.draw(st.sampled_from(self.question_answers),
                                              label="asker")
        if class_attribute(type(self), "approver") is not None:
            return
        names = [spec.name for spec in self._specs]
        self._answers = data.draw(st.fixed_dictionaries(
            {name: st.sampled_from([a for a in self.answers if self.edits or a != "edit"])
             for name in names}), label="approver")
        self._edits = {name: data.draw(self._arguments(name), label=f"edit of {name}")
                       for name, answer in self._answers.items() if answer == "edit"}

    def _draw_cancel(self, data: st.DataObject) -> int | None:
        return data.draw(st.one_of(st.none(), st.none(), st.integers(0, 25)),
                         label="cancel after records")

    def _drive(self, action: Callable[[], Awaitable[PromptResult]], cancel_at: int | None) -> None:
        self._closed_log = self.run(drive, self.live, action, cancel_at)
