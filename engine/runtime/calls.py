"""One call, in order: the path every call takes, the model's and nested ones alike.

:func:`advance` carries a call forward **from the state its log is in**: a fresh call and one
interrupted half-way (a pause for approval, a process that stopped) take the same path, so
nothing the log already settled is asked or run again. This module is DESIGN's "one call, in
order", and its comments use the same step numbers:

1. ``tool_call_requested`` is recorded by the caller (:mod:`engine.runtime.batch` for the model's
   calls, :mod:`engine.runtime.context` for ``ctx.execute_tool``);
2. availability and the arguments (:func:`~engine.runtime.gate.gate`);
3. the ``tool_call`` handlers (:func:`~engine.runtime.gate.gate`);
4. the policy (:func:`~engine.runtime.gate.gate`);
5. the approver, if the policy said ask (:func:`~engine.runtime.gate.ask`; the host may answer later:
   :func:`~engine.runtime.gate.resolve`);
6. ``tool_execution_started``, the body under the tool's timeout, the output check
   (:func:`execute`);
7. the ``tool_result`` handlers (:func:`execute`);
8. the one terminal event (:func:`execute` for a completed call; :mod:`engine.runtime.endings` for
   every other ending, written by the step that decides it).

Steps 2 to 5, everything decided before a body may run, are :mod:`engine.runtime.gate`'s (and are
exported here too); steps 6 to 8 are here. Each step records what it decides and returns;
:func:`advance` calls the next one from the state the log is in (which event may follow which
is :mod:`engine.core.lifecycle`'s, and the recorder enforces it). Whatever escapes (a cancellation
above all) first closes the call and its nested calls, shielded, then propagates.

Every function takes what it uses: the session's fixed setup (an
:class:`~engine.core.environment.Environment`), its :class:`~engine.runtime.recorder.Recorder` (which holds
the log and the state folded from it) and, where a step waits or runs a body, the process's
bookkeeping (:class:`~engine.runtime.inflight.InFlight`).
"""

from __future__ import annotations

import inspect
from typing import Any

import trio

from events.results import ToolResult, error_result
from events.types import (
    ResultHandlerFailed,
    ToolCallCompleted,
    ToolCallDenied,
    ToolExecutionStarted,
    ToolRegistered,
)

from ..core.environment import Environment
from ..core.handlers import ResultPatch, ToolResultDraft, handler_name
from ..core.jsonvalues import copy_json, own_result
from ..core.lifecycle import CallStage
from ..core.limits import result_size
from ..core.outputs import (
    Failure,
    InvalidOutput,
    check_sized_output,
    checked_patch,
    describe,
    error_info,
    text_limit,
)
from ..core.policy import deny_rule
from ..core.refusals import APPROVER_REFUSED, denied_result, not_approved_result
from ..core.toolcontext import BodySuspended
from ..core.tools import ToolCall
from ..core.views import LiveCall
from .context import CallContext
from .copied import in_copy
from .endings import close_open, deny, fail
from .gate import ask, gate, resolve
from .inflight import InFlight
from .keeping import artifact_limit, keep, kept_as_is
from .recorder import Recorder

__all__ = ["advance", "ask", "execute", "gate", "resolve"]


async def advance(env: Environment, recorder: Recorder, inflight: InFlight, call_id: str, *,
                  wait: bool, gate_only: bool = False) -> ToolResult | None:
    """Take the call from where the log says it is to its end, and return its result. The
    end is recorded; writing it is the caller's (:mod:`engine.runtime.recorder` says when).

    Returns ``None`` when it cannot go on yet: it waits for an approval and ``wait`` is false
    (a top-level call: the session pauses), or ``gate_only`` stops it once allowed (a batch
    gates every call before running any). With ``wait``, a pending approval is awaited in this
    task (a nested call: its parent waits until the host answers).

    Whatever escapes (a cancellation above all) first closes the call and its nested calls,
    shielded, then propagates. When the session is closing with the call in flight
    (``inflight.suspending``), nothing is recorded: the log stays as a stopped process would
    leave it, to be resumed.
    """
    calls = recorder.projection.live_calls
    try:
        while True:
            env = env.newest  # each step reads the session's setup as it is now
            view = calls[call_id]
            stage = view.stage
            if stage is CallStage.CLOSED:  # 8. it has its terminal event
                assert view.result is not None
                return view.result
            if stage is CallStage.REQUESTED:  # 2.-4.
                await gate(env, recorder, view)
            elif stage is CallStage.ASKING:  # 5.
                await ask(env, recorder, inflight, view)
            elif stage is CallStage.AWAITING:  # 5., answered by the host
                if not wait:
                    return None
                await inflight.park(call_id)
            elif stage is CallStage.DENYING:  # 5., refused: the denial was not written
                given = view.approval.reason if view.approval is not None else None
                deny(recorder, view, given or APPROVER_REFUSED, "approver",
                     not_approved_result(view.name, given))
            elif gate_only:
                return None
            elif stage is CallStage.ALLOWED:  # 6.-8.
                return await execute(env, recorder, inflight, view)
            else:  # RUNNING, with no task of this process running it: it was interrupted
                return await _again(env, recorder, inflight, view)
    except BaseException as exc:
        if not inflight.suspending:
            reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                f"interrupted by {describe(exc)}")
            with trio.CancelScope(shield=True):
                close_open(recorder, call_id, reason)
                await recorder.flush()
        raise


# -- 6.-8. the body, the result handlers, the terminal event -----------------------------------

async def execute(env: Environment, recorder: Recorder, inflight: InFlight,
                  view: LiveCall) -> ToolResult | None:
    """Run the body of an allowed call and end it. ``started`` is recorded and written before
    the body runs, also when the body runs again after a restart (an interrupted idempotent
    call): no body runs without a fact in the log that says so. And no such fact without a
    body: a call already stopped when its body would begin (the session closing just after
    the host answered it) records nothing, and stays allowed in the log for the next
    ``resume()`` (docs/resume.md, "Closing a session with work in flight").

    The end is recorded, not written: whoever hands the result on writes it first
    (:mod:`engine.runtime.recorder` lists who, and when). ``None``: the body stopped with
    its state recorded (:class:`~engine.core.toolcontext.BodySuspended`), and the call runs
    on at the next ``resume()``."""
    call_id = view.call_id
    if not _may_run(env, recorder, view):  # a deny rule, or no such tool here: it ends unrun
        assert view.result is not None
        return view.result
    # 6. started (written first), the body under its timeout, the output check. A call
    # stopped before its body could begin (its task was woken by an answer just as the session
    # began to close, or the prompt was cancelled) is not started: the check and the record
    # are one step, nothing can stop the call between them, and once recorded, started is
    # written whatever happens, so the log says started only of a body that was entered.
    spec = env.registry.specs[view.name]
    await trio.lowlevel.checkpoint_if_cancelled()
    recorder.record(ToolExecutionStarted(call_id=call_id))
    if not recorder.written_at_once():
        await recorder.flush_finally()
    call = ToolCall(call_id=call_id, name=spec.name, arguments=copy_json(view.arguments),
                    origin=view.origin, parent_id=view.parent_id)
    ctx = CallContext(call, env, recorder, inflight, advance)
    failure: Failure | None = None
    returned: Any = None
    suspended = False
    try:
        if spec.timeout is None:
            returned = await in_copy(spec.execute, call, ctx)
        else:
            with trio.move_on_after(spec.timeout) as scope:
                returned = await in_copy(spec.execute, call, ctx)
            if scope.cancelled_caught:
                failure = ("timeout", f"{spec.name} timed out after {spec.timeout} s", None, None)
    except BodySuspended as exc:
        if not ctx.suspended:  # only a body whose ctx recorded its state may stop so
            error = error_info(exc, text_limit(env.limits))
            failure = ("raised", f"{spec.name} failed: {error.type}: {error.message}", error,
                       None)
        suspended = ctx.suspended
    except InvalidOutput as exc:
        error = error_info(exc, text_limit(env.limits))
        failure = ("invalid_output", f"{spec.name} returned output that violates its output "
                   f"schema: {error.message}", error, None)
    except Exception as exc:
        error = error_info(exc, text_limit(env.limits))
        failure = ("raised", f"{spec.name} failed: {error.type}: {error.message}", error, None)
    finally:
        unasked = ctx.close()
    for child in unasked:  # a body run again that no longer asks for a recorded nested call
        close_open(recorder, child, f"{spec.name} ran again and did not ask for it")
    if suspended:  # it stopped with its state recorded: the call runs on at the next resume()
        await recorder.flush()
        return None

    raw: ToolResult | None = None
    size = 0
    upper = artifact_limit(env, recorder, view)  # a long result kept whole, if it may be
    if failure is None:
        raw, failure, size = check_sized_output(env.registry, env.limits, spec, returned,
                                                upper=upper)
    # a result past max_result_bytes (kept as an artifact, if at all) is never in the log
    fits = raw if size <= env.limits.max_result_bytes else None
    # 7. the tool_result handlers; 8. the terminal event, with what the model reads of a
    # long result and where the whole is kept (engine.runtime.keeping)
    if failure is None:
        assert raw is not None
        final = await _result_handlers(env, recorder, view, raw,
                                       upper) if env.result_handlers else raw
        known = size if final is raw else None
        result, kept, failure = (final, None, None) if kept_as_is(env, view, known) else (
            await keep(env, recorder, view, final, known))
        if failure is None:
            changed = final is not raw and final != raw
            recorder.record(ToolCallCompleted(call_id=call_id, result=result, kept=kept,
                                              returned=fits if changed else None))
            return result
    kind, message, info, detail = failure
    result = await _result_handlers(env, recorder, view, error_result(message))
    fail(recorder, call_id, kind, message, error=info, returned=fits, result=result,
         detail=detail)
    return result


def _may_run(env: Environment, recorder: Recorder, view: LiveCall) -> bool:
    """What must hold when a body is about to run (first time, or again after a restart),
    whatever the log decided before: no deny rule matches its tool, and this process has the
    tool. If not, the call ends here, denied with the rule that matched or failed as
    ``unavailable``, and False is returned. A session reopened with new rules or without a
    tool gets here with calls the log allowed or sent for approval under the old setup."""
    name = view.name
    denied = deny_rule(name, env.rules)
    registered = name in env.registry.specs
    if denied is None and registered:
        return True
    # a body that runs again may have left nested calls open: they end first
    close_open(recorder, view.call_id, f"{name} was not run again", include_root=False)
    if denied is not None:
        recorder.record(ToolCallDenied(
            call_id=view.call_id, reason=denied.reason, by="policy", rule=denied.rule,
            result=denied_result(name, denied.reason)))
    else:
        used = " (its approval was not used)" if view.approval is not None else ""
        fail(recorder, view.call_id, "unavailable",
             f"Tool {name} is not available: no tool of that name is registered in this "
             f"process, so the call was not run{used}; register the tool when reopening a "
             f"session whose calls need it", text=f"Tool {name} is not available")
    return False


async def _result_handlers(env: Environment, recorder: Recorder, view: LiveCall,
                           result: ToolResult, upper: int | None = None) -> ToolResult:
    """Step 7: the ``tool_result`` handlers, chained; one that raises is recorded and skipped.
    A patched result may be as large as the call's result may be (``upper``: as an artifact,
    past ``max_result_bytes``)."""
    limit = max(upper or 0, env.limits.max_result_bytes)
    for handler in env.result_handlers:
        draft = ToolResultDraft(call_id=view.call_id, name=view.name,
                                arguments=copy_json(view.arguments),
                                origin=view.origin, parent_id=view.parent_id,
                                result=own_result(result))
        try:
            patch = handler(draft)
            if patch is not None and not isinstance(patch, ResultPatch) and inspect.isawaitable(
                patch
            ):
                patch = await patch
            if patch is None:
                continue
            if not isinstance(patch, ResultPatch):
                raise TypeError(f"returned {patch!r}; return None or a ResultPatch")
            patched = checked_patch(env.registry, view.name, result, patch,
                                    own_result(patch.apply(result)))
            if result_size(patched) > limit:
                raise ValueError("the patched result is over the size limit")
        except Exception as exc:
            recorder.record(ResultHandlerFailed(
                call_id=view.call_id, handler=handler_name(handler),
                error=error_info(exc, text_limit(env.limits))))
            continue
        result = patched
    return result


# -- bodies that run again ----------------------------------------------------------------------

async def _again(env: Environment, recorder: Recorder, inflight: InFlight,
                 view: LiveCall) -> ToolResult | None:
    """A body that started in an earlier process and has no result: run it again if its
    tool is idempotent (its nested calls are answered from the log), else end it.

    The re-run records a new ``started`` and writes it before the body runs, like a first
    run: a second process re-entering the same call at the same time then gets the store's
    ``ConflictError`` (its session stops) instead of running the body a second time."""
    call_id = view.call_id
    spec = env.registry.specs.get(view.name)
    if (spec is not None and spec.annotations.idempotent is True
            and _idempotent_when_started(recorder, call_id, view.name)):
        return await execute(env, recorder, inflight, view)
    close_open(recorder, call_id, "interrupted", include_root=False)
    return fail(
        recorder, call_id, "interrupted",
        f"{view.name} was interrupted: the process stopped while it ran, and it was not "
        f"run again because it is not declared idempotent",
    )


def _idempotent_when_started(recorder: Recorder, call_id: str, name: str) -> bool:
    """Whether the version of the tool that started the call declared itself idempotent:
    a new version cannot make an old, half-run call safe to run again. (Only a restart asks,
    so reading the log backwards costs nothing that matters.)"""
    started = False
    for record in reversed(recorder.history):
        event = record.event
        if not started:
            started = isinstance(event, ToolExecutionStarted) and event.call_id == call_id
        elif isinstance(event, ToolRegistered) and event.spec.name == name:
            return event.spec.annotations.idempotent is True
    return False
