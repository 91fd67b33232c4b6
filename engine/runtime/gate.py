"""The gate: steps 2 to 5 of one call, everything decided before its body may run.

:func:`gate` takes a requested call through availability and its arguments (2), the
``tool_call`` handlers (3) and the policy (4), and records what ends it or the policy's
decision; :func:`ask` puts a call the policy said ask for to the approver (5), and
:func:`resolve` records the answer, the approver's now or the host's later. Each records what it
decides and returns: :func:`engine.runtime.calls.advance`, which carries a call from the state its log
is in, calls them, then runs the body (:mod:`engine.runtime.calls`, steps 6 to 8).
"""

from __future__ import annotations

import inspect
from typing import Any

from events.results import ErrorInfo
from events.types import (
    Annotations,
    ApprovalRequested,
    ApprovalResolved,
    FailureDetail,
    PolicyDecided,
    ToolCallRewritten,
)

from ..core.approvals import LATER, ApprovalAnswer, ApprovalRequest, as_answer, broken_promise
from ..core.environment import Environment
from ..core.handlers import Block, Rewrite, ToolCallDraft, handler_name
from ..core.jsonvalues import copy_json, ensure_json
from ..core.limits import admit, not_json, oversized
from ..core.outputs import describe, error_info, text_limit
from ..core.policy import decide
from ..core.refusals import APPROVER_FAILED, APPROVER_REFUSED, denied_result, not_approved_result
from ..core.tools import ToolSpec, may_call
from ..core.views import LiveCall
from .endings import block, deny, fail
from .inflight import InFlight
from .recorder import Recorder

__all__ = ["ask", "gate", "resolve"]


# -- 2.-4. the gate -----------------------------------------------------------------------------

async def gate(env: Environment, recorder: Recorder, view: LiveCall) -> None:
    """Steps 2-4 for a requested call: end it, or record the policy's decision on it."""
    call_id, name = view.call_id, view.name
    projection = recorder.projection
    # 2. availability, depth, size, the input schema
    spec = env.registry.specs.get(name)
    if spec is None or not may_call(spec.exposure, name in projection.active_tools, view.origin):
        why = "no tool has that name" if spec is None else (
            f"its exposure {spec.exposure!r} does not let a {view.origin} call use it now"
        )
        fail(recorder, call_id, "unavailable", f"Tool {name} is not available: {why}",
             text=f"Tool {name} is not available")
        return
    if call_id.count("/") > env.max_depth:
        fail(recorder, call_id, "depth_limit",
             f"nested calls may go {env.max_depth} deep; {call_id} is deeper",
             detail=FailureDetail(limit=env.max_depth))
        return
    arguments = view.arguments
    if (size := oversized(arguments)) is not None:
        fail(recorder, call_id, "too_large", f"{name} was not run: its arguments take {size} "
             f"bytes, over the limit of {env.limits.max_argument_bytes}",
             detail=FailureDetail(limit=env.limits.max_argument_bytes, size=size))
        return
    if (unread := not_json(arguments)) is not None:  # a model's, recorded as a marker
        fail(recorder, call_id, "invalid_arguments",
             f"Invalid arguments for {name}: not JSON ({unread[0]})", detail=unread[1])
        return
    if not _valid_arguments(env, recorder, call_id, spec, arguments, after=None):
        return

    # 3. the tool_call handlers, in registration order: the first block wins
    for handler in env.call_handlers:
        draft = ToolCallDraft(call_id=call_id, name=name, arguments=copy_json(arguments),
                              origin=view.origin, parent_id=view.parent_id)
        try:
            verdict = handler(draft)
            if verdict is not None and not isinstance(verdict, (Block, Rewrite)) and (
                inspect.isawaitable(verdict)
            ):
                verdict = await verdict
        except Exception as exc:  # fail closed; the model is told no more than that
            by = handler_name(handler)
            block(recorder, view, f"the tool_call handler {by} failed ({describe(exc)})", by,
                  error=error_info(exc, text_limit(env.limits)))
            return
        if verdict is None:
            continue
        by = handler_name(handler)
        if (problem := _unusable(env, verdict)) is not None:  # fail closed too
            block(recorder, view, f"a tool_call handler {problem}", by)
            return
        if isinstance(verdict, Block):
            block(recorder, view, verdict.reason, by)
            return
        arguments = copy_json(verdict.arguments)
        recorder.record(ToolCallRewritten(call_id=call_id, arguments=arguments, by=by))
        if not _valid_arguments(env, recorder, call_id, spec, arguments, after=by):
            return

    # 4. the policy, on the final arguments, with the tool's declarations as registered now
    # (a handler that waited may have let the host register a new version)
    registry = env.newest.registry
    spec = registry.specs.get(name, spec)
    decision = decide(name, spec.annotations, rules=env.rules,
                      session_grants=projection.session_answers,
                      annotation_rule=registry.by_annotations)
    recorder.record(PolicyDecided(call_id=call_id, decision=decision.decision,
                                  reason=decision.reason, rule=decision.rule))
    if decision.decision == "deny":
        deny(recorder, view, decision.reason, "policy", denied_result(name, decision.reason),
             rule=decision.rule)


def _unusable(env: Environment, verdict: Any) -> str | None:
    """What is wrong with a ``tool_call`` handler's answer other than ``None`` (words the
    model may read), or ``None`` if the gate can use it."""
    if not isinstance(verdict, (Block, Rewrite)):
        return f"returned a {type(verdict).__name__}, not None, a Block or a Rewrite"
    if isinstance(verdict, Rewrite):
        try:
            ensure_json(verdict.arguments)
        except Exception as exc:
            return f"rewrote the arguments to a value that is not JSON ({describe(exc)})"
        if oversized(admit(verdict.arguments, env.limits)) is not None:
            return "rewrote the arguments over the size limit"
    return None


def _valid_arguments(env: Environment, recorder: Recorder, call_id: str, spec: ToolSpec,
                     arguments: Any, *, after: str | None) -> bool:
    """Whether the arguments fit the input schema (and a typed tool's parameter types:
    :class:`~engine.core.registry.TypedInputs`); if not, the call fails saying why."""
    problem = env.registry.inputs[spec.name].violation(arguments)
    if problem is None:
        return True
    where = f" (after the rewrite by {after})" if after else ""
    fail(recorder, call_id, "invalid_arguments",
         f"Invalid arguments for {spec.name}{where}: {problem}")
    return False


# -- 5. approval --------------------------------------------------------------------------------

async def ask(env: Environment, recorder: Recorder, inflight: InFlight, view: LiveCall) -> None:
    """Step 5: ask the approver about a call the policy said ask for. An answer is recorded
    at once (:func:`resolve`); :data:`~engine.core.approvals.LATER` leaves the request pending in
    the log, for ``session.resolve_approval`` (or, from an approver that answers at once,
    refuses as an error would: :func:`~engine.core.approvals.broken_promise`)."""
    call_id = view.call_id
    reason = view.policy.reason if view.policy is not None else "the policy asks"
    recorder.record(ApprovalRequested(call_id=call_id, reason=reason))
    await recorder.flush()
    # the tool may be missing from this process (a session reopened without it): the approver
    # reads the hints the log recorded, and the call fails "unavailable" if it would run
    known = env.registry.specs.get(view.name) or recorder.projection.tools.get(view.name)
    request = ApprovalRequest(call_id=call_id, name=view.name, arguments=copy_json(view.arguments),
                              reason=reason,
                              annotations=known.annotations if known else Annotations(),
                              origin=view.origin, parent_id=view.parent_id)
    inflight.ask(call_id)  # not pending for the host while its approver decides
    error = None
    try:
        reply = env.approver(request)
        if inspect.isawaitable(reply):  # a plain function answers as it returns
            reply = await reply
        if reply is LATER:
            if env.may_defer:
                return
            # an approver that answers at once may have a call in the prompt's own task: a
            # call waiting here for the host could never let the prompt return
            raise broken_promise(env.approver)
        answer = as_answer(reply)
        if answer.granted and answer.arguments is not None:
            ensure_json(answer.arguments)
    except Exception as exc:  # refuses; the model is told no more than that
        answer = ApprovalAnswer(granted=False, reason=f"{APPROVER_FAILED} ({describe(exc)})")
        error = error_info(exc, text_limit(env.limits))
    finally:
        inflight.asked(call_id)
    resolve(env, recorder, call_id, answer, error=error)


def resolve(env: Environment, recorder: Recorder, call_id: str, answer: ApprovalAnswer, *,
            error: ErrorInfo | None = None, later: bool = False) -> None:
    """Record the answer to a pending approval: the approver's edit (a rewrite, validated
    again), the resolution, and the denial if it refuses (with its reason for the model;
    ``error``: the approver raised). The one place answers are written, whether the approver
    gave them or the host did ``later``, at a pause (recorded: a replay answers "later" there
    too)."""
    view = recorder.projection.live_calls[call_id]
    edited = answer.granted and answer.arguments is not None
    size = oversized(admit(answer.arguments, env.limits)) if edited else None
    if edited and size is None:
        recorder.record(ToolCallRewritten(
            call_id=call_id, arguments=copy_json(answer.arguments), by="approver"))
    recorder.record(ApprovalResolved(call_id=call_id, granted=answer.granted,
                                     scope=answer.scope, reason=answer.reason,
                                     later=later))
    if not answer.granted:
        deny(recorder, view, answer.reason or APPROVER_REFUSED, "approver",
             not_approved_result(view.name, answer.reason, failed=error is not None),
             error=error)
        return
    if size is not None:  # the edit is not recorded: the call ends instead
        fail(recorder, call_id, "too_large", f"{view.name} was not run: the approver's edited "
             f"arguments take {size} bytes, over the limit of {env.limits.max_argument_bytes}",
             detail=FailureDetail(limit=env.limits.max_argument_bytes, size=size))
        return
    spec = env.registry.specs.get(view.name)
    if edited and spec is not None:
        _valid_arguments(env, recorder, call_id, spec, answer.arguments, after="approver")
