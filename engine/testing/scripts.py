"""Scripted faux sessions over the catalogue: plain data Hypothesis draws, and the harness that
runs one.

:func:`session_scripts` draws a :class:`SessionScript`: which annotations each tool of the
catalogue (:mod:`engine.testing.catalogue`) has, which policy rules, ``tool_call`` and
``tool_result`` handlers and approver answers the session gets, what the faux model says turn
after turn, when the host cancels a prompt, and which tools the host calls itself
(``session.call_tool``, beside the prompts). Model calls mix valid and invalid arguments,
unknown tools, hidden and model-only ones, tools that raise, time out or fail softly, nested
plans and parallel batches (sometimes with a duplicated model call id, or cut off for
``length``). :meth:`SessionScript.build` turns it into fresh live objects (a
:class:`ScriptedSession`); :func:`run_script` runs it on a store and returns a
:class:`ScriptRun`; :func:`event_logs` draws the records such a run wrote. Example::

    @given(session_scripts())
    def test_my_store_keeps_every_log(script):
        run = trio.run(run_script, script, MyStore(), clock=MockClock(autojump_threshold=0))
        assert run.stored_records == run.live_records

A run is a function of the script: the clock and the session id are injected, nothing in a
tool reads a clock or a random source, and Hypothesis seeds trio's scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import trio
import trio.testing
from hypothesis import strategies as st

from events.stores import EventStore, MemoryStore
from events.types import Annotations, Record

from ..approvals import ApprovalAnswer, ApprovalRequest
from ..callids import from_host
from ..context import CallOutcome
from ..handlers import (
    Block,
    ResultPatch,
    Rewrite,
    ToolCallDraft,
    ToolCallHandler,
    ToolResultDraft,
    ToolResultHandler,
)
from ..models import (
    FauxModel,
    FauxStep,
    ModelMessage,
    ModelRequest,
    faux_message,
    faux_text,
    faux_tool_call,
)
from ..policy import PolicyRules
from ..session import Session
from ..tools import ToolSpec
from .arguments import weighted
from .catalogue import INT_TOOLS, NOT_JSON, TOOL_NAMES, UNKNOWN_TOOL, NestRecord, catalogue_tools
from .strategies import stop_reasons
from .tools import BodyRuns, counting_clock

__all__ = [
    "ANSWERS",
    "GRANTING",
    "SCRIPT_SESSION_ID",
    "Answer",
    "CallHandlerSpec",
    "ResultHandlerSpec",
    "ScriptRun",
    "ScriptedSession",
    "SessionScript",
    "TurnSpec",
    "call_handler_specs",
    "event_logs",
    "make_call_handler",
    "make_result_handler",
    "policy_patterns",
    "policy_rules",
    "result_handler_specs",
    "run_script",
    "script_calls",
    "script_turns",
    "session_scripts",
]

#: the session id :func:`run_script` gives every session
SCRIPT_SESSION_ID = "scripted-session"

Answer = Literal["grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad"]
ANSWERS: tuple[Answer, ...] = (
    "grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad",
)
#: the approver's answers that grant the call
GRANTING: frozenset[str] = frozenset({"grant", "grant_session", "edit", "edit_bad"})
#: virtual seconds after an assistant message at which the host may cancel its prompt
CANCEL_DELAYS: tuple[float, ...] = (0.0, 0.5, 2.0, 4.5)


# -- the data a script is made of ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CallHandlerSpec:
    """A ``tool_call`` handler: ``block``, ``rewrite`` (``bump`` n, or ``break`` the
    arguments), ``raise`` for the tools in ``names``, or ``pass`` (async, does nothing)."""

    kind: Literal["block", "rewrite", "raise", "pass"]
    names: frozenset[str] = frozenset()
    mode: Literal["bump", "break"] = "bump"


@attrs.frozen(kw_only=True)
class ResultHandlerSpec:
    """A ``tool_result`` handler: ``patch`` (replace the content) or ``raise`` for ``names``."""

    kind: Literal["patch", "raise"]
    names: frozenset[str] = frozenset()


@attrs.frozen(kw_only=True)
class TurnSpec:
    """One assistant message: its calls as ``(name, arguments)``; no calls ends the prompt.

    ``cancel_after``: the host cancels the prompt this many virtual seconds after the model
    sent this message (the cancellation lands wherever the session then is)."""

    calls: tuple[tuple[str, Any], ...] = ()
    duplicate_ids: bool = False
    stop_reason: str = "stop"  # the provider's word; one that means cut off fails the calls
    cancel_after: float | None = None


@attrs.frozen(kw_only=True)
class SessionScript:
    """Everything that decides a scripted session, as plain (printable, shrinkable) data."""

    annotations: Mapping[str, Annotations]
    rules: PolicyRules
    answers: Mapping[str, Answer]
    call_handlers: tuple[CallHandlerSpec, ...]
    result_handlers: tuple[ResultHandlerSpec, ...]
    turns: tuple[TurnSpec, ...]
    max_depth: int = 8
    #: calls the host makes (``session.call_tool``), each in a task of its own, beside the
    #: prompts
    host_calls: tuple[tuple[str, Any], ...] = ()

    def build(self) -> ScriptedSession:
        """Fresh tools, handlers, approver and model for one run of this script."""
        return ScriptedSession(self)


# -- strategies --------------------------------------------------------------------------------

_hints = st.sampled_from([None, True, False])
_policy_annotations = st.builds(
    lambda r, d, o: Annotations(read_only=r, destructive=d, open_world=o), _hints, _hints, _hints)
_valid_int_args = st.builds(lambda n: {"n": n}, st.integers(0, 9))
_invalid_args = st.sampled_from([{}, {"n": "x"}, {"n": 1, "extra": True}, {"n": 1.5}, ["n"],
                                 NOT_JSON])


def script_calls(depth: int = 3) -> st.SearchStrategy[tuple[str, Any]]:
    """A call as ``(name, arguments)`` to the catalogue (or to an unknown tool); ``nest``
    calls carry plans up to ``depth`` deep."""
    simple = st.tuples(st.sampled_from((*INT_TOOLS, UNKNOWN_TOOL)),
                       st.sampled_from([True, True, False]).flatmap(
                           lambda valid: _valid_int_args if valid else _invalid_args))
    if depth <= 0:
        return simple
    plan = st.lists(script_calls(depth - 1).map(lambda c: {"name": c[0], "arguments": c[1]}),
                    max_size=3)
    nested = st.tuples(st.just("nest"), st.builds(lambda p: {"plan": p}, plan))
    return st.sampled_from(["simple"] * 4 + ["nested"]).flatmap(
        lambda kind: simple if kind == "simple" else nested)


def script_turns(max_calls: int = 4, depth: int = 3,
                 cancellations: bool = True) -> st.SearchStrategy[TurnSpec]:
    """One assistant message of 0 to ``max_calls`` calls (a parallel batch when several)."""
    batch = st.lists(script_calls(depth), min_size=1, max_size=max_calls).map(tuple)
    cancel = (st.sampled_from([None] * 8 + list(CANCEL_DELAYS)) if cancellations
              else st.none())
    with_calls = st.builds(
        TurnSpec,
        calls=batch,
        duplicate_ids=st.sampled_from([False] * 9 + [True]),
        stop_reason=weighted((9, st.just("stop")), (1, stop_reasons())),
        cancel_after=cancel,
    )
    return st.one_of(st.just(TurnSpec()), with_calls, with_calls, with_calls)


policy_patterns = st.sampled_from([*TOOL_NAMES, "read_*", "*_step", "s*", "model_?nly"])
_name_sets = st.frozensets(st.sampled_from(TOOL_NAMES), max_size=3)
call_handler_specs = st.one_of(
    st.builds(CallHandlerSpec, kind=st.just("block"), names=_name_sets),
    st.builds(CallHandlerSpec, kind=st.just("rewrite"), names=_name_sets,
              mode=st.sampled_from(["bump", "bump", "break"])),
    st.builds(CallHandlerSpec, kind=st.just("raise"), names=_name_sets),
    st.builds(CallHandlerSpec, kind=st.just("pass")),
)
result_handler_specs = st.builds(ResultHandlerSpec, kind=st.sampled_from(["patch", "raise"]),
                                  names=_name_sets)


def policy_rules(
    patterns: st.SearchStrategy[str] = policy_patterns,
) -> st.SearchStrategy[PolicyRules]:
    """Host rules by tool name: mostly none, sometimes a pattern or two to allow, deny or ask
    (drawn from ``patterns``; default: the catalogue's names and a few globs)."""
    sparse = st.lists(patterns, max_size=2)
    some: st.SearchStrategy[list[str]] = st.one_of(st.just([]), st.just([]), sparse)
    return st.builds(lambda allow, deny, ask: PolicyRules(allow=allow, deny=deny, ask=ask),
                     some, some, some)


def session_scripts(
    max_turns: int = 5, *, cancellations: bool = True
) -> st.SearchStrategy[SessionScript]:
    """A whole scripted session over the catalogue (see the module docstring).

    ``cancellations=False`` leaves out the host's cancellations (a script then cancels only
    through tool timeouts)."""
    rules = policy_rules()
    return st.builds(
        SessionScript,
        annotations=st.fixed_dictionaries({name: _policy_annotations for name in TOOL_NAMES}),
        rules=rules,
        answers=st.fixed_dictionaries({name: st.sampled_from(ANSWERS) for name in TOOL_NAMES}),
        call_handlers=st.lists(call_handler_specs, max_size=3).map(tuple),
        result_handlers=st.lists(result_handler_specs, max_size=2).map(tuple),
        turns=st.lists(script_turns(cancellations=cancellations), min_size=1,
                       max_size=max_turns).map(tuple),
        max_depth=st.sampled_from([8, 8, 2, 1]),
        host_calls=st.one_of(st.just(()), st.lists(script_calls(), max_size=3).map(tuple)),
    )


# -- building and running ------------------------------------------------------------------------


def make_call_handler(index: int, spec: CallHandlerSpec) -> ToolCallHandler:
    """The ``tool_call`` handler ``spec`` describes; ``index`` names it in the log
    (``"{kind}_handler_{index}"``)."""
    if spec.kind == "pass":
        async def passes(draft: ToolCallDraft) -> None:
            await trio.lowlevel.checkpoint()
            return None
        return passes

    def handler(draft: ToolCallDraft) -> Block | Rewrite | None:
        if draft.name not in spec.names:
            return None
        if spec.kind == "block":
            return Block(reason=f"handler {index} blocks {draft.name}")
        if spec.kind == "raise":
            raise ValueError(f"handler {index} crashed on {draft.name}")
        arguments = draft.arguments
        if not (isinstance(arguments, dict) and isinstance(arguments.get("n"), int)):
            return None
        if spec.mode == "break":
            return Rewrite(arguments={"n": "broken"})
        return Rewrite(arguments={"n": arguments["n"] + 10})

    handler.__qualname__ = f"{spec.kind}_handler_{index}"
    return handler


def make_result_handler(spec: ResultHandlerSpec) -> ToolResultHandler:
    """The ``tool_result`` handler ``spec`` describes (named ``"{kind}_result_handler"``)."""
    def handler(draft: ToolResultDraft) -> ResultPatch | None:
        if draft.name not in spec.names:
            return None
        if spec.kind == "raise":
            raise KeyError(f"result handler crashed on {draft.name}")
        return ResultPatch(content=[f"patched {draft.call_id}"])

    handler.__qualname__ = f"{spec.kind}_result_handler"
    return handler


class ScriptedSession:
    """The live objects of one run: tools, handlers, approver, model, and what they saw."""

    def __init__(self, script: SessionScript) -> None:
        self.script = script
        #: body runs per engine call id
        self.body_runs = BodyRuns()
        self._nest = NestRecord()
        #: the call ids the approver was asked about, in order
        self.approver_asked: list[str] = []
        #: what ``session.call_tool`` gave the host, by call id
        self.host_outcomes: dict[str, CallOutcome] = {}
        #: the host's cancel scope around the prompt that runs now (set by :func:`run_script`)
        self.scope: trio.CancelScope | None = None
        self.tools: list[ToolSpec] = catalogue_tools(script.annotations, self.body_runs,
                                                     record=self._nest)
        self.call_handlers = [make_call_handler(i, s) for i, s in enumerate(script.call_handlers)]
        self.result_handlers = [make_result_handler(s) for s in script.result_handlers]
        self.model = FauxModel(self._steps())

    @property
    def body_arguments(self) -> Mapping[str, Any]:
        """The arguments each body run received, by call id."""
        return self.body_runs.arguments

    @property
    def nested_outcomes(self) -> Mapping[str, Any]:
        """What ``ctx.execute_tool`` gave back to ``nest``, by the nested call's id."""
        return self._nest.outcomes

    @property
    def nested_raised(self) -> list[BaseException]:
        """Exceptions ``ctx.execute_tool`` raised other than cancellation (must stay empty)."""
        return self._nest.raised

    async def approver(self, request: ApprovalRequest) -> bool | ApprovalAnswer:
        """Answers by tool name, as the script says."""
        self.approver_asked.append(request.call_id)
        answer = self.expected_answer(request.name)
        if answer == "raise":
            raise RuntimeError(f"the approver crashed on {request.name}")
        if answer == "grant":
            return True
        if answer == "deny":
            return False
        if answer in ("edit", "edit_bad"):
            edited = {"n": 7} if answer == "edit" else {"n": "seven"}
            return ApprovalAnswer(granted=True, arguments=edited, reason=answer)
        return ApprovalAnswer(granted=answer == "grant_session", scope="session",
                              reason=f"{answer} for {request.name}")

    async def call_host(self, session: Session, name: str, arguments: Any) -> None:
        """One host call of the script; its outcome goes to :attr:`host_outcomes`."""
        outcome = await session.call_tool(name, arguments)
        self.host_outcomes[outcome.call_id] = outcome

    def expected_answer(self, name: str) -> Answer:
        """What the approver answers about ``name``."""
        return self.script.answers.get(name, "deny")

    def _steps(self) -> list[FauxStep]:
        steps: list[FauxStep] = []
        for index, turn in enumerate(self.script.turns):
            if not turn.calls:
                steps.append(faux_text(f"pause {index}"))
                continue
            blocks = [
                faux_tool_call(name, arguments,
                               id="dup" if turn.duplicate_ids and i < 2 else f"t{index}_{i}")
                for i, (name, arguments) in enumerate(turn.calls)
            ]
            message = faux_message(blocks, stop_reason=turn.stop_reason)
            if turn.cancel_after is None:
                steps.append(message)
            else:
                steps.append(self._cancelling(message, turn.cancel_after))
        steps.append(faux_text("done"))
        return steps

    def _cancelling(self, message: ModelMessage, delay: float) -> FauxStep:
        def step(request: ModelRequest) -> ModelMessage:
            if self.scope is not None:
                self.scope.deadline = min(self.scope.deadline, trio.current_time() + delay)
            return message
        return step


@attrs.frozen(kw_only=True)
class ScriptRun:
    """What one run of a script left behind."""

    harness: ScriptedSession
    live_records: tuple[Record, ...]
    stored_records: tuple[Record, ...]
    snapshot: Any
    open_calls: tuple[str, ...]
    pending_approvals: tuple[str, ...]
    transcript: tuple[Any, ...]
    prompts: int
    #: the turns (assistant message numbers) whose prompt the host cancelled
    cancelled_turns: tuple[int, ...] = ()


async def run_script(script: SessionScript, store: EventStore | None = None) -> ScriptRun:
    """Run ``script`` on ``store`` (a new :class:`~events.MemoryStore` by default): prompt
    until the model's script is used up, cancelling the prompts the script cancels. Run it
    under ``MockClock(autojump_threshold=0)``; raises ``AssertionError`` if a prompt leaves a
    call open."""
    store = store if store is not None else MemoryStore()
    harness = script.build()
    left_open: list[tuple[int, tuple[str, ...]]] = []
    cancelled_turns: list[int] = []
    async with Session.open(store, model=harness.model, tools=harness.tools,
                            approver=harness.approver, rules=script.rules,
                            max_depth=script.max_depth, clock=counting_clock(),
                            new_session_id=lambda: SCRIPT_SESSION_ID) as session:
        for handler in harness.call_handlers:
            session.on_tool_call(handler)
        for result_handler in harness.result_handlers:
            session.on_tool_result(result_handler)
        prompts = 0
        async with trio.open_nursery() as hosts:
            for name, arguments in script.host_calls:
                hosts.start_soon(harness.call_host, session, name, arguments)
            while harness.model.remaining:
                with trio.CancelScope() as scope:
                    harness.scope = scope
                    await session.prompt(f"prompt {prompts}")
                harness.scope = None
                if scope.cancelled_caught:
                    cancelled_turns.append(session.state.turn)
                prompts += 1
                # a host call is its caller's to wait for, not the prompt's
                if left := tuple(c for c in session.state.open_calls if not from_host(c)):
                    left_open.append((prompts, left))
        harness.model.assert_complete()
        live = tuple(session.records)
        state = session.state
        snapshot = state.snapshot()
        open_calls = state.open_calls
        pending = state.pending_approvals
        transcript = tuple(session.transcript)
    assert not left_open, f"prompts left calls open: {left_open}"
    stored = tuple(await store.read(SCRIPT_SESSION_ID))
    return ScriptRun(harness=harness, live_records=live, stored_records=stored,
                     snapshot=snapshot, open_calls=open_calls, pending_approvals=pending,
                     transcript=transcript, prompts=prompts,
                     cancelled_turns=tuple(cancelled_turns))


def _run_for_log(script: SessionScript) -> list[Record]:
    run = trio.run(run_script, script, MemoryStore(),
                   clock=trio.testing.MockClock(autojump_threshold=0))
    return list(run.stored_records)


def event_logs(
    scripts: st.SearchStrategy[SessionScript] | None = None,
) -> st.SearchStrategy[list[Record]]:
    """The records a real session wrote: a drawn script (default :func:`session_scripts`)
    run on a :class:`~events.MemoryStore` in virtual time.

    Each draw runs a whole session with ``trio.run``, so draw it outside a trio loop (as
    ``@given`` arguments, not with ``data.draw`` inside an async test). Example::

        @given(event_logs())
        def test_my_exporter_reads_every_log(records):
            assert my_export(records)
    """
    return (scripts if scripts is not None else session_scripts()).map(_run_for_log)
