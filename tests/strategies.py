"""Hypothesis strategies for whole scripted sessions, and the harness that runs one.

:func:`session_scripts` draws a :class:`SessionScript`: plain data saying which annotations
each tool of a fixed catalogue has, which policy rules, ``tool_call`` and ``tool_result``
handlers and approver answers the session gets, and what the faux model says turn after turn.
:meth:`SessionScript.build` turns it into fresh, deterministic objects (tools that count their
body runs per call id, handlers, an approver that logs whom it was asked about, a
:class:`~engine.models.FauxModel`); :func:`run_script` runs it on a store. Build anew for every
run: the counters live in the built objects.

The catalogue (every tool takes ``{"n": int}`` except ``nest``):

========== =========================================================================
read_a/b   returns text; ``read_a`` reports progress and yields to the scheduler
wipe       returns text (meant to be given dangerous annotations)
boom       raises ``RuntimeError``
soft_fail  returns ``is_error=True`` with content and structured content
shaped     declares an output schema; odd ``n`` returns output that violates it
seq_step   ``execution_mode="sequential"``: its batch runs one call after another
slow       ``timeout=5``: odd ``n`` sleeps forever (times out), even ``n`` sleeps 1 s
hidden     exposure ``hidden``: the model may not call it, a nested call may
model_only exposure ``model-only``: a nested call may not call it
nest       ``{"plan": [{"name", "arguments"}, ...]}``: makes those nested calls in order;
           ``timeout=4``, so a slow child makes it time out (and cancels the child
           that is running then)
========== =========================================================================

Tools sleep, so run a script under ``trio.testing.MockClock(autojump_threshold=0)``: virtual
time keeps the runs fast and deterministic.

Model calls mix all of these with ``no_such_tool`` and invalid arguments; a batch may have a
duplicated model call id or stop for ``length``. Nothing in a tool reads a clock or a random
source, so with an injected clock and session id the whole log is a function of the script
(and of trio's scheduler, which Hypothesis seeds).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs
import trio
from hypothesis import strategies as st

from engine import (
    ApprovalDecision,
    ApprovalRequest,
    Block,
    CallOutcome,
    PolicyRules,
    ResultPatch,
    Rewrite,
    Session,
    ToolCall,
    ToolCallEvent,
    ToolContext,
    ToolResult,
    ToolResultEvent,
    ToolSpec,
    text,
    tool,
)
from engine.handlers import ToolCallHandler, ToolResultHandler
from engine.models import FauxModel, FauxStep, faux_message, faux_text, faux_tool_call
from events.stores import EventStore
from events.types import Annotations, Record

__all__ = [
    "CallHandlerSpec",
    "INT_TOOLS",
    "ResultHandlerSpec",
    "RunOutcome",
    "SESSION_ID",
    "ScriptedSession",
    "SessionScript",
    "TOOL_NAMES",
    "TurnSpec",
    "UNKNOWN_TOOL",
    "GRANTING",
    "NOT_JSON",
    "annotations",
    "run_script",
    "session_scripts",
]

SESSION_ID = "prop-session"
UNKNOWN_TOOL = "no_such_tool"
INT_TOOLS: tuple[str, ...] = (
    "read_a", "read_b", "wipe", "boom", "soft_fail", "shaped", "seq_step", "slow", "hidden",
    "model_only",
)
TOOL_NAMES: tuple[str, ...] = (*INT_TOOLS, "nest")
INT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"plan": {"type": "array", "items": {"type": "object"}}},
    "required": ["plan"],
}
SHAPED_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"size": {"type": "integer"}},
    "required": ["size"],
}

Answer = Literal["grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad"]
ANSWERS: tuple[Answer, ...] = (
    "grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad",
)
#: the approver's answers that grant the call
GRANTING: frozenset[str] = frozenset({"grant", "grant_session", "edit", "edit_bad"})
#: arguments that ``nest`` turns into a value that is not JSON (a set) before calling
NOT_JSON = "__not_json__"
#: timeouts of ``slow`` and ``nest`` (virtual seconds: run under ``trio.testing.MockClock``)
SLOW_TIMEOUT = 5.0
NEST_TIMEOUT = 4.0


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
    """One assistant message: its calls as ``(name, arguments)``; no calls ends the prompt."""

    calls: tuple[tuple[str, Any], ...] = ()
    duplicate_ids: bool = False
    truncated: bool = False


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

    def build(self) -> ScriptedSession:
        """Fresh tools, handlers, approver and model for one run of this script."""
        return ScriptedSession(self)


# -- strategies ------------------------------------------------------------------------------------

hints = st.sampled_from([None, True, False])


def annotations() -> st.SearchStrategy[Annotations]:
    """Any of the 27 combinations of the three hints the policy reads."""
    return st.builds(lambda r, d, o: Annotations(read_only=r, destructive=d, open_world=o),
                     hints, hints, hints)


valid_int_args = st.builds(lambda n: {"n": n}, st.integers(0, 9))
invalid_args = st.sampled_from([{}, {"n": "x"}, {"n": 1, "extra": True}, {"n": 1.5}, ["n"],
                                 NOT_JSON])


def calls(depth: int) -> st.SearchStrategy[tuple[str, Any]]:
    """A call as ``(name, arguments)``; ``nest`` calls carry plans up to ``depth`` deep."""
    simple = st.tuples(st.sampled_from((*INT_TOOLS, UNKNOWN_TOOL)),
                       st.sampled_from([True, True, False]).flatmap(
                           lambda valid: valid_int_args if valid else invalid_args))
    if depth <= 0:
        return simple
    plan = st.lists(calls(depth - 1).map(lambda c: {"name": c[0], "arguments": c[1]}),
                    max_size=3)
    nested = st.tuples(st.just("nest"), st.builds(lambda p: {"plan": p}, plan))
    return st.sampled_from(["simple"] * 4 + ["nested"]).flatmap(
        lambda kind: simple if kind == "simple" else nested)


def turns(max_calls: int = 4, depth: int = 3) -> st.SearchStrategy[TurnSpec]:
    """One assistant message of 0 to ``max_calls`` calls."""
    batch = st.lists(calls(depth), min_size=1, max_size=max_calls).map(tuple)
    with_calls = st.builds(
        TurnSpec,
        calls=batch,
        duplicate_ids=st.sampled_from([False] * 9 + [True]),
        truncated=st.sampled_from([False] * 9 + [True]),
    )
    return st.one_of(st.just(TurnSpec()), with_calls, with_calls, with_calls)


patterns = st.sampled_from([*TOOL_NAMES, "read_*", "*_step", "s*", "model_?nly"])
name_sets = st.frozensets(st.sampled_from(TOOL_NAMES), max_size=3)
call_handler_specs = st.one_of(
    st.builds(CallHandlerSpec, kind=st.just("block"), names=name_sets),
    st.builds(CallHandlerSpec, kind=st.just("rewrite"), names=name_sets,
              mode=st.sampled_from(["bump", "bump", "break"])),
    st.builds(CallHandlerSpec, kind=st.just("raise"), names=name_sets),
    st.builds(CallHandlerSpec, kind=st.just("pass")),
)
result_handler_specs = st.builds(ResultHandlerSpec, kind=st.sampled_from(["patch", "raise"]),
                                 names=name_sets)


def session_scripts(max_turns: int = 5) -> st.SearchStrategy[SessionScript]:
    """A whole scripted session (see the module docstring)."""
    sparse = st.lists(patterns, max_size=2)
    rules = st.builds(
        lambda allow, deny, ask: PolicyRules(allow=allow, deny=deny, ask=ask),
        st.one_of(st.just([]), st.just([]), sparse),
        st.one_of(st.just([]), st.just([]), sparse),
        st.one_of(st.just([]), st.just([]), sparse),
    )
    return st.builds(
        SessionScript,
        annotations=st.fixed_dictionaries({name: annotations() for name in TOOL_NAMES}),
        rules=rules,
        answers=st.fixed_dictionaries({name: st.sampled_from(ANSWERS) for name in TOOL_NAMES}),
        call_handlers=st.lists(call_handler_specs, max_size=3).map(tuple),
        result_handlers=st.lists(result_handler_specs, max_size=2).map(tuple),
        turns=st.lists(turns(), min_size=1, max_size=max_turns).map(tuple),
        max_depth=st.sampled_from([8, 8, 2, 1]),
    )


# -- building and running ------------------------------------------------------------------------


class ScriptedSession:
    """The live objects of one run: tools, handlers, approver, model, and what they saw."""

    def __init__(self, script: SessionScript) -> None:
        self.script = script
        #: body runs per engine call id
        self.body_runs: Counter[str] = Counter()
        #: the arguments each body run received, by call id
        self.body_arguments: dict[str, Any] = {}
        #: what ``ctx.execute_tool`` gave back to ``nest``, by the nested call's id
        self.nested_outcomes: dict[str, CallOutcome] = {}
        #: exceptions ``ctx.execute_tool`` raised (it must not, for tool failures)
        self.nested_raised: list[BaseException] = []
        #: the call ids the approver was asked about, in order
        self.approver_asked: list[str] = []
        self.tools = self._tools()
        self.call_handlers = [self._call_handler(i, s) for i, s in enumerate(script.call_handlers)]
        self.result_handlers = [self._result_handler(s) for s in script.result_handlers]
        self.model = FauxModel(self._steps())

    # tools

    def _ran(self, call: ToolCall) -> int:
        self.body_runs[call.call_id] += 1
        self.body_arguments[call.call_id] = call.arguments
        n: int = call.arguments["n"] if isinstance(call.arguments, dict) and "n" in call.arguments else 0
        return n

    def _tools(self) -> list[ToolSpec]:
        notes = self.script.annotations

        def spec(name: str, input_schema: dict[str, Any] = INT_SCHEMA,
                 **kwargs: Any) -> Callable[[Any], ToolSpec]:
            def wrap(execute: Any) -> ToolSpec:
                built: ToolSpec = tool(name=name, description=f"the {name} tool",
                                       input_schema=input_schema, annotations=notes[name],
                                       **kwargs)(execute)
                return built
            return wrap

        @spec("read_a")
        async def read_a(call: ToolCall, ctx: ToolContext) -> ToolResult:
            n = self._ran(call)
            ctx.report_progress(f"reading {n}", {"n": n})
            await trio.lowlevel.checkpoint()
            return ToolResult(content=[text(f"read_a {n}")])

        @spec("read_b")
        async def read_b(call: ToolCall, ctx: ToolContext) -> ToolResult:
            return ToolResult(content=[text(f"read_b {self._ran(call)}")])

        @spec("wipe")
        async def wipe(call: ToolCall, ctx: ToolContext) -> ToolResult:
            return ToolResult(content=[text(f"wiped {self._ran(call)}")])

        @spec("boom")
        async def boom(call: ToolCall, ctx: ToolContext) -> ToolResult:
            raise RuntimeError(f"boom {self._ran(call)}")

        @spec("soft_fail")
        async def soft_fail(call: ToolCall, ctx: ToolContext) -> ToolResult:
            n = self._ran(call)
            return ToolResult(content=[text(f"{n} tests failed")],
                              structured_content={"failed": n}, is_error=True)

        @spec("shaped", output_schema=SHAPED_OUTPUT)
        async def shaped(call: ToolCall, ctx: ToolContext) -> ToolResult:
            n = self._ran(call)
            structured = {"size": n} if n % 2 == 0 else {"size": f"{n} bytes"}
            content = [] if n % 3 == 0 else [text(f"size {n}")]
            return ToolResult(content=content, structured_content=structured)

        @spec("seq_step", execution_mode="sequential")
        async def seq_step(call: ToolCall, ctx: ToolContext) -> ToolResult:
            n = self._ran(call)
            await trio.lowlevel.checkpoint()
            return ToolResult(content=[text(f"step {n}")])

        @spec("slow", timeout=SLOW_TIMEOUT)
        async def slow(call: ToolCall, ctx: ToolContext) -> ToolResult:
            n = self._ran(call)
            if n % 2:
                await trio.sleep_forever()
            await trio.sleep(1)
            return ToolResult(content=[text(f"slow {n}")])

        @spec("hidden", exposure="hidden")
        async def hidden(call: ToolCall, ctx: ToolContext) -> ToolResult:
            return ToolResult(content=[text(f"hidden {self._ran(call)}")])

        @spec("model_only", exposure="model-only")
        async def model_only(call: ToolCall, ctx: ToolContext) -> ToolResult:
            return ToolResult(content=[text(f"model only {self._ran(call)}")])

        @spec("nest", input_schema=PLAN_SCHEMA, timeout=NEST_TIMEOUT)
        async def nest(call: ToolCall, ctx: ToolContext) -> ToolResult:
            self._ran(call)
            errors: list[bool] = []
            for step in call.arguments["plan"]:
                arguments = step.get("arguments")
                if arguments == NOT_JSON:
                    arguments = {"n": {1, 2}}
                try:
                    outcome = await ctx.execute_tool(step.get("name", ""), arguments)
                except Exception as exc:  # execute_tool must not raise for a tool failure
                    self.nested_raised.append(exc)
                    raise
                self.nested_outcomes[outcome.call_id] = outcome
                errors.append(outcome.is_error)
            return ToolResult(content=[text(f"nested {len(errors)}")],
                              structured_content={"errors": errors})

        return [read_a, read_b, wipe, boom, soft_fail, shaped, seq_step, slow, hidden,
                model_only, nest]

    # handlers and approver

    @staticmethod
    def _call_handler(index: int, spec: CallHandlerSpec) -> ToolCallHandler:
        if spec.kind == "pass":
            async def passes(event: ToolCallEvent) -> None:
                await trio.lowlevel.checkpoint()
                return None
            return passes

        def handler(event: ToolCallEvent) -> Block | Rewrite | None:
            if event.name not in spec.names:
                return None
            if spec.kind == "block":
                return Block(reason=f"handler {index} blocks {event.name}")
            if spec.kind == "raise":
                raise ValueError(f"handler {index} crashed on {event.name}")
            arguments = event.arguments
            if not (isinstance(arguments, dict) and isinstance(arguments.get("n"), int)):
                return None
            if spec.mode == "break":
                return Rewrite(arguments={"n": "broken"})
            return Rewrite(arguments={"n": arguments["n"] + 10})

        handler.__qualname__ = f"{spec.kind}_handler_{index}"
        return handler

    @staticmethod
    def _result_handler(spec: ResultHandlerSpec) -> ToolResultHandler:
        def handler(event: ToolResultEvent) -> ResultPatch | None:
            if event.name not in spec.names:
                return None
            if spec.kind == "raise":
                raise KeyError(f"result handler crashed on {event.name}")
            return ResultPatch(content=[f"patched {event.call_id}"])

        handler.__qualname__ = f"{spec.kind}_result_handler"
        return handler

    async def approver(self, request: ApprovalRequest) -> bool | ApprovalDecision:
        """Answers by tool name, as the script says."""
        self.approver_asked.append(request.call_id)
        answer = self.script.answers.get(request.name, "deny")
        if answer == "raise":
            raise RuntimeError(f"the approver crashed on {request.name}")
        if answer == "grant":
            return True
        if answer == "deny":
            return False
        if answer in ("edit", "edit_bad"):
            edited = {"n": 7} if answer == "edit" else {"n": "seven"}
            return ApprovalDecision(granted=True, arguments=edited, reason=answer)
        return ApprovalDecision(granted=answer == "grant_session", scope="session",
                                reason=f"{answer} for {request.name}")

    # the model

    def _steps(self) -> list[FauxStep]:
        steps: list[FauxStep] = []
        for index, turn in enumerate(self.script.turns):
            if not turn.calls:
                steps.append(faux_text(f"pause {index}"))
                continue
            blocks = [
                faux_tool_call(name, arguments, id="dup" if turn.duplicate_ids and i < 2 else None)
                for i, (name, arguments) in enumerate(turn.calls)
            ]
            if turn.truncated:
                steps.append(faux_message(blocks, stop_reason="length"))
            else:
                steps.append(blocks)
        steps.append(faux_text("done"))
        return steps

    def expected_answer(self, name: str) -> Answer:
        """What the approver answers about ``name``."""
        return self.script.answers.get(name, "deny")


@attrs.frozen(kw_only=True)
class RunOutcome:
    """What one run of a script left behind."""

    harness: ScriptedSession
    live_records: tuple[Record, ...]
    stored_records: tuple[Record, ...]
    snapshot: Any
    open_calls: tuple[str, ...]
    pending_approvals: tuple[str, ...]
    transcript: tuple[Any, ...]
    prompts: int


def counting_clock() -> Callable[[], float]:
    """A clock that ticks one second per reading."""
    ticks = itertools.count(1)
    return lambda: float(next(ticks))


async def run_script(script: SessionScript, store: EventStore) -> RunOutcome:
    """Run ``script`` on ``store``: prompt until the model's script is used up."""
    harness = script.build()
    open_after_prompt: list[tuple[str, ...]] = []
    async with Session.open(store, model=harness.model, tools=harness.tools,
                            approver=harness.approver, rules=script.rules,
                            max_depth=script.max_depth, clock=counting_clock(),
                            new_session_id=lambda: SESSION_ID) as session:
        for handler in harness.call_handlers:
            session.on_tool_call(handler)
        for result_handler in harness.result_handlers:
            session.on_tool_result(result_handler)
        prompts = 0
        while harness.model.remaining:
            await session.prompt(f"prompt {prompts}")
            prompts += 1
            open_after_prompt.append(session.state.open_calls)
        harness.model.assert_complete()
        live = tuple(session.records)
        state = session.state
        snapshot = state.snapshot()
        open_calls = state.open_calls
        pending = state.pending_approvals
        transcript = tuple(session.transcript)
    assert all(not ids for ids in open_after_prompt), f"calls left open: {open_after_prompt}"
    stored = tuple(await store.read(SESSION_ID))
    return RunOutcome(harness=harness, live_records=live, stored_records=stored,
                      snapshot=snapshot, open_calls=open_calls, pending_approvals=pending,
                      transcript=transcript, prompts=prompts)

