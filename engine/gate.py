"""Steps 2 to 5 of a call: availability, arguments, ``tool_call`` handlers, policy, approval.

Each function takes the call as the log knows it (its :class:`~engine.views.LiveCall`), records
what it decides and returns; :meth:`engine.calls.CallRunner.advance` calls the next step from
the state the log is in. So a call that was interrupted half-way (a crash, a pause) continues
from the last fact the log holds: a verdict recorded is never asked for again.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from events.results import error_result
from events.types import (
    Annotations,
    ApprovalRequested,
    ApprovalResolved,
    FailureDetail,
    PolicyDecided,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallRewritten,
)

from .approvals import LATER, ApprovalDecision, ApprovalRequest, as_decision
from .execution import describe
from .handlers import Block, Rewrite, ToolCallEvent, handler_name
from .jsonvalues import copy_json, ensure_json
from .limits import admit, oversized
from .policy import decide
from .tools import ToolSpec, may_call
from .views import LiveCall

if TYPE_CHECKING:
    from .calls import CallRunner

__all__ = ["ask", "gate", "resolve"]


async def gate(runner: CallRunner, view: LiveCall) -> None:
    """Steps 2-4 for a requested call: end it, or record the policy's decision on it."""
    call_id, name = view.call_id, view.name
    projection = runner.recorder.projection
    spec = runner.registry.specs.get(name)
    if spec is None or not may_call(spec.exposure, name in projection.active_tools, view.origin):
        why = "no tool has that name" if spec is None else (
            f"its exposure {spec.exposure!r} does not let a {view.origin} call use it now"
        )
        runner.fail(call_id, "unavailable", f"Tool {name} is not available: {why}",
                    text=f"Tool {name} is not available")
        return
    if call_id.count("/") > runner.max_depth:
        runner.fail(call_id, "depth_limit",
                    f"nested calls may go {runner.max_depth} deep; {call_id} is deeper",
                    detail=FailureDetail(limit=runner.max_depth))
        return
    arguments = view.arguments
    if (size := oversized(arguments)) is not None:
        runner.fail(call_id, "too_large", f"{name} was not run: its arguments take {size} "
                    f"bytes, over the limit of {runner.limits.max_argument_bytes}",
                    detail=FailureDetail(limit=runner.limits.max_argument_bytes, size=size))
        return
    if not valid_arguments(runner, call_id, spec, arguments, after=None):
        return

    for handler in runner.call_handlers:
        event = ToolCallEvent(call_id=call_id, name=name, arguments=copy_json(arguments),
                              origin=view.origin, parent_id=view.parent_id)
        try:
            verdict = handler(event)
            if verdict is not None and not isinstance(verdict, (Block, Rewrite)):
                if inspect.isawaitable(verdict):
                    verdict = await verdict
                if verdict is not None and not isinstance(verdict, (Block, Rewrite)):
                    raise TypeError(f"returned {verdict!r}; return None, Block or Rewrite")
            if isinstance(verdict, Rewrite):
                ensure_json(verdict.arguments)
                if oversized(admit(verdict.arguments, runner.limits)) is not None:
                    raise ValueError("the rewritten arguments are over the size limit")
        except Exception as exc:
            by = handler_name(handler)
            _block(runner, view, f"the tool_call handler {by} failed ({describe(exc)})", by)
            return
        if verdict is None:
            continue
        by = handler_name(handler)
        if isinstance(verdict, Block):
            _block(runner, view, verdict.reason, by)
            return
        if isinstance(verdict, Rewrite):
            arguments = copy_json(verdict.arguments)
            runner.recorder.record(ToolCallRewritten(call_id=call_id, arguments=arguments, by=by))
            if not valid_arguments(runner, call_id, spec, arguments, after=by):
                return

    verdict_ = decide(name, spec.annotations, rules=runner.rules,
                      session_grants=projection.session_grants)
    runner.recorder.record(PolicyDecided(call_id=call_id, decision=verdict_.decision,
                                         reason=verdict_.reason, rule=verdict_.rule))
    if verdict_.decision == "deny":
        _deny(runner, view, verdict_.reason, "policy", f"{name} was denied: {verdict_.reason}",
              rule=verdict_.rule)


async def ask(runner: CallRunner, view: LiveCall) -> None:
    """Step 5: ask the approver about a call the policy said ask for.

    An answer is recorded at once (:func:`resolve`); :data:`~engine.approvals.LATER` leaves
    the request pending in the log, for ``session.resolve_approval``.
    """
    call_id = view.call_id
    reason = view.verdict.reason if view.verdict is not None else "the policy asks"
    runner.recorder.record(ApprovalRequested(call_id=call_id, reason=reason))
    await runner.recorder.flush()
    # the tool may be missing from this process (a session reopened without it): the approver
    # reads the hints the log recorded, and the call fails "unavailable" if it would run
    spec = runner.registry.specs.get(view.name)
    known = spec or runner.recorder.projection.tools.get(view.name)
    request = ApprovalRequest(call_id=call_id, name=view.name, arguments=copy_json(view.arguments),
                              reason=reason,
                              annotations=known.annotations if known else Annotations(),
                              origin=view.origin, parent_id=view.parent_id)
    runner.asking[call_id] = None  # not pending for the host while its approver decides
    try:
        answer = await runner.approver(request)
        if answer is LATER:
            return
        decision = as_decision(answer)
        if decision.granted and decision.arguments is not None:
            ensure_json(decision.arguments)
    except Exception as exc:
        decision = ApprovalDecision(
            granted=False, reason=f"the approver failed ({describe(exc)})"
        )
    finally:
        del runner.asking[call_id]
        runner.changed()
    resolve(runner, call_id, decision)


def resolve(runner: CallRunner, call_id: str, decision: ApprovalDecision, *,
            later: bool = False) -> None:
    """Record the answer to a pending approval: the approver's edit (a rewrite, validated
    again), the resolution, and the denial if it refuses. The one place answers are written,
    whether the approver gave them or the host did ``later``, at a pause (recorded: a replay
    answers "later" there too)."""
    view = runner.recorder.projection.live_calls[call_id]
    edited = decision.granted and decision.arguments is not None
    size = oversized(admit(decision.arguments, runner.limits)) if edited else None
    if edited and size is None:
        runner.recorder.record(ToolCallRewritten(
            call_id=call_id, arguments=copy_json(decision.arguments), by="approver"))
    runner.recorder.record(ApprovalResolved(call_id=call_id, granted=decision.granted,
                                            scope=decision.scope, reason=decision.reason,
                                            later=later))
    if not decision.granted:
        _deny(runner, view, decision.reason or "the approver refused", "approver",
              f"{view.name} was not approved")
        return
    if size is not None:  # the edit is not recorded: the call ends instead
        runner.fail(call_id, "too_large", f"{view.name} was not run: the approver's edited "
                    f"arguments take {size} bytes, over the limit of "
                    f"{runner.limits.max_argument_bytes}",
                    detail=FailureDetail(limit=runner.limits.max_argument_bytes, size=size))
        return
    spec = runner.registry.specs.get(view.name)
    if edited and spec is not None:
        valid_arguments(runner, call_id, spec, decision.arguments, after="approver")


def valid_arguments(
    runner: CallRunner, call_id: str, spec: ToolSpec, arguments: Any, *, after: str | None
) -> bool:
    """Whether the arguments fit the input schema; if not, the call fails saying why."""
    problem = runner.registry.inputs[spec.name].violation(arguments)
    if problem is None:
        return True
    where = f" (after the rewrite by {after})" if after else ""
    runner.fail(call_id, "invalid_arguments", f"Invalid arguments for {spec.name}{where}: {problem}")
    return False


def deny_refused(runner: CallRunner, view: LiveCall) -> None:
    """End a call whose refusal is recorded but whose denial is not (an interrupted write)."""
    reason = (view.approval.reason if view.approval is not None else None) or "the approver refused"
    _deny(runner, view, reason, "approver", f"{view.name} was not approved")


def _block(runner: CallRunner, view: LiveCall, reason: str, by: str) -> None:
    runner.recorder.record(ToolCallBlocked(
        call_id=view.call_id, reason=reason, by=by,
        result=error_result(f"{view.name} was blocked: {reason}"),
    ))


def _deny(runner: CallRunner, view: LiveCall, reason: str, by: Any, text: str,
          rule: str | None = None) -> None:
    runner.recorder.record(ToolCallDenied(call_id=view.call_id, reason=reason, by=by,
                                          result=error_result(text), rule=rule))
