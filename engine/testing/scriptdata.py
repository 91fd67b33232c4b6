"""What a scripted session is made of: the plain data Hypothesis draws, and the live objects
one run builds from it.

A :class:`SessionScript` is printable, shrinkable data: annotations, rules, approver answers,
handler specs and the model's turns. :meth:`SessionScript.build` makes a
:class:`ScriptedSession` of it: fresh catalogue tools, the handlers its specs describe
(:func:`make_call_handler`, :func:`make_result_handler`), an approver that answers by tool
name, and a faux model that says the turns, cancelling the host's prompt where a turn says to.
The strategies that draw scripts and the harness that runs one are
:mod:`engine.testing.scripts`, which exports every name here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import trio

from events.types import Annotations

from ..core.approvals import ApprovalAnswer, ApprovalRequest
from ..core.handlers import (
    Block,
    ResultPatch,
    Rewrite,
    ToolCallDraft,
    ToolCallHandler,
    ToolResultDraft,
    ToolResultHandler,
)
from ..core.policy import PolicyRules
from ..core.toolcontext import CallOutcome
from ..core.tools import ToolSpec
from ..models import (
    FauxModel,
    FauxStep,
    ModelMessage,
    ModelRequest,
    faux_message,
    faux_text,
    faux_tool_call,
)
from ..runtime.session import Session
from .catalogue import NestRecord, catalogue_tools
from .tools import BodyRuns

__all__ = [
    "ANSWERS",
    "GRANTING",
    "Answer",
    "CallHandlerSpec",
    "ResultHandlerSpec",
    "ScriptedSession",
    "SessionScript",
    "TurnSpec",
    "make_call_handler",
    "make_result_handler",
]

Answer = Literal["grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad"]
ANSWERS: tuple[Answer, ...] = (
    "grant", "grant_session", "deny", "deny_session", "raise", "edit", "edit_bad",
)
#: the approver's answers that grant the call
GRANTING: frozenset[str] = frozenset({"grant", "grant_session", "edit", "edit_bad"})


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

# -- the live objects of a run -------------------------------------------------------------------


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
