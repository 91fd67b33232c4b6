"""Steps 6 to 8 of a call: run the body, check its output, chain the result handlers, and
record the one terminal event."""

from __future__ import annotations

import inspect
import json
import traceback
from typing import TYPE_CHECKING, Any

import attrs
import trio

from events.results import ErrorInfo, TextContent, ToolResult, error_result
from events.types import (
    FailureDetail,
    FailureKind,
    ResultHandlerFailed,
    ToolCallCompleted,
    ToolCallDenied,
    ToolExecutionStarted,
)

from .context import ToolContext
from .handlers import UNSET, ResultPatch, ToolResultEvent, handler_name
from .jsonvalues import NotJson, copy_json, own_result
from .limits import result_size
from .policy import deny_rule
from .tools import ToolCall, ToolSpec
from .views import LiveCall

if TYPE_CHECKING:
    from .calls import CallRunner

__all__ = ["describe", "error_info", "execute", "may_run"]

Failure = tuple[FailureKind, str, "ErrorInfo | None", "FailureDetail | None"]


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not kept)"


def describe(exc: BaseException, limit: int = 2_000) -> str:
    """``"Type: message"`` for an exception from code the engine does not control: its
    ``str()`` may raise or be huge, and neither may break the session or flood the log."""
    try:
        message = str(exc)
    except Exception:
        message = "<str() of the exception failed>"
    return f"{type(exc).__name__}: {_clip(message, limit)}"


def error_info(exc: BaseException, limit: int = 2_000) -> ErrorInfo:
    """An exception as the log keeps it: type and message, and the traceback for people,
    each cut to ``limit`` characters."""
    try:
        message = str(exc)
    except Exception:
        message = "<str() of the exception failed>"
    try:
        trace = "".join(traceback.format_exception(exc))
    except Exception:
        trace = "<the traceback could not be formatted>"
    return ErrorInfo(type=type(exc).__name__, message=_clip(message, limit),
                     traceback=_clip(trace, limit))


def _text_limit(runner: CallRunner) -> int:
    # one message appears up to four times in a failure (message, result, error, traceback)
    return max(200, runner.limits.max_result_bytes // 4)


async def execute(runner: CallRunner, view: LiveCall) -> ToolResult:
    """Run the body of an allowed call and end it. ``started`` is recorded and written before
    the body runs, also when the body runs again after a restart (an interrupted idempotent
    call): no body runs without a fact in the log that says so."""
    call_id = view.call_id
    if not may_run(runner, view):  # a deny rule, or no such tool here: it ends unrun
        assert view.result is not None
        if view.parent_id is None:
            await runner.recorder.flush()
        return view.result
    spec = runner.registry.specs[view.name]
    runner.recorder.record(ToolExecutionStarted(call_id=call_id))
    await runner.recorder.flush()
    call = ToolCall(call_id=call_id, name=spec.name, arguments=copy_json(view.arguments),
                    origin=view.origin, parent_id=view.parent_id)
    ctx = ToolContext(runner, call)
    failure: Failure | None = None
    returned: Any = None
    try:
        if spec.timeout is None:
            returned = await spec.execute(call, ctx)
        else:
            with trio.move_on_after(spec.timeout) as scope:
                returned = await spec.execute(call, ctx)
            if scope.cancelled_caught:
                failure = ("timeout", f"{spec.name} timed out after {spec.timeout} s", None, None)
    except Exception as exc:
        error = error_info(exc, _text_limit(runner))
        failure = ("raised", f"{spec.name} failed: {error.type}: {error.message}", error, None)
    finally:
        unasked = ctx.close()
    for child in unasked:  # a body run again that no longer asks for a recorded nested call
        runner.close_open(child, f"{spec.name} ran again and did not ask for it")

    raw: ToolResult | None = None
    if failure is None:
        raw, failure = _check_output(runner, spec, returned)
    if failure is None:
        assert raw is not None
        result = await _result_handlers(runner, view, raw)
        runner.recorder.record(ToolCallCompleted(
            call_id=call_id, result=result,
            returned=None if result is raw or result == raw else raw))
    else:
        kind, message, info, detail = failure
        result = await _result_handlers(runner, view, error_result(message))
        runner.fail(call_id, kind, message, error=info, returned=raw, result=result,
                    detail=detail)
    if view.parent_id is None:
        # A nested call's end is written with its parent's next flush (its next nested call,
        # or its own end): its result goes to the parent, inside this process. A top-level
        # call's result is written now, before the model or the host can see it.
        await runner.recorder.flush()
    return result


def may_run(runner: CallRunner, view: LiveCall) -> bool:
    """What must hold when a body is about to run (first time, or again after a restart),
    whatever the log decided before: no deny rule matches its tool, and this process has the
    tool. If not, the call ends here, denied with the rule that matched or failed as
    ``unavailable``, and False is returned. A session reopened with new rules or without a
    tool gets here with calls the log allowed or sent for approval under the old setup."""
    name = view.name
    denied = deny_rule(name, runner.rules)
    registered = name in runner.registry.specs
    if denied is None and registered:
        return True
    # a body that runs again may have left nested calls open: they end first
    runner.close_open(view.call_id, f"{name} was not run again", include_root=False)
    if denied is not None:
        runner.recorder.record(ToolCallDenied(
            call_id=view.call_id, reason=denied.reason, by="policy", rule=denied.rule,
            result=error_result(f"{name} was denied: {denied.reason}")))
    else:
        used = " (its approval was not used)" if view.approval is not None else ""
        runner.fail(view.call_id, "unavailable",
                    f"Tool {name} is not available: no tool of that name is registered in "
                    f"this process, so the call was not run{used}; register the tool when "
                    f"reopening a session whose calls need it",
                    text=f"Tool {name} is not available")
    return False


def _check_output(runner: CallRunner, spec: ToolSpec, returned: Any) -> tuple[ToolResult | None, Failure | None]:
    if not isinstance(returned, ToolResult):
        return None, ("invalid_output", f"{spec.name} returned {type(returned).__name__}, "
                      f"not a ToolResult", None, FailureDetail(type=type(returned).__name__))
    try:
        result = own_result(returned)
    except ValueError as exc:
        return None, ("not_serialisable", f"{spec.name} returned a result that is not JSON: {exc}",
                      None, exc.detail if isinstance(exc, NotJson) else None)
    if (size := result_size(result)) > runner.limits.max_result_bytes:
        return None, ("too_large", f"{spec.name} returned {size} bytes, over the limit of "
                      f"{runner.limits.max_result_bytes}; the result was not kept", None,
                      FailureDetail(limit=runner.limits.max_result_bytes, size=size))
    validator = runner.registry.outputs.get(spec.name)
    if validator is not None and not result.is_error:
        if result.structured_content is None:
            return result, ("invalid_output", f"{spec.name} declares an output schema but "
                            "returned no structured content", None, None)
        problem = validator.violation(result.structured_content)
        if problem is not None:
            return result, ("invalid_output", f"{spec.name} returned output that violates "
                            f"its output schema: {problem}", None, None)
    if result.structured_content is not None and not result.content:
        result = attrs.evolve(result, content=(_json_block(result.structured_content),))
    return result, None


def _json_block(structured: Any) -> TextContent:
    """The text block a result with structured content and no content gets (MCP's rule)."""
    return TextContent(text=json.dumps(structured, ensure_ascii=False))


def _checked_patch(runner: CallRunner, name: str, before: ToolResult, patch: ResultPatch,
                   patched: ToolResult) -> ToolResult:
    """A handler's patched result, held to the rules the tool's own result met: a JSON text
    block the engine made for the old structured content is made again for the new one, and a
    success must satisfy the tool's output schema (``ValueError`` otherwise: the patch is
    refused, like one over the size limit)."""
    if patch.content is UNSET and patch.structured_content is not UNSET and (
        not before.content or (before.structured_content is not None
                               and before.content == (_json_block(before.structured_content),))
    ):
        structured = patched.structured_content
        patched = attrs.evolve(patched, content=() if structured is None
                               else (_json_block(structured),))
    validator = runner.registry.outputs.get(name)
    if validator is not None and not patched.is_error:
        if patched.structured_content is None:
            raise ValueError(f"the patched result is a success without the structured content "
                             f"{name}'s output schema requires; the patch was not applied")
        problem = validator.violation(patched.structured_content)
        if problem is not None:
            raise ValueError(f"the patched result violates {name}'s output schema: {problem}; "
                             f"the patch was not applied")
    return patched


async def _result_handlers(runner: CallRunner, view: LiveCall, result: ToolResult) -> ToolResult:
    for handler in runner.result_handlers:
        event = ToolResultEvent(call_id=view.call_id, name=view.name,
                                arguments=copy_json(view.arguments),
                                origin=view.origin, parent_id=view.parent_id,
                                result=own_result(result))
        try:
            patch = handler(event)
            if patch is not None and not isinstance(patch, ResultPatch) and inspect.isawaitable(
                patch
            ):
                patch = await patch
            if patch is None:
                continue
            if not isinstance(patch, ResultPatch):
                raise TypeError(f"returned {patch!r}; return None or a ResultPatch")
            patched = _checked_patch(runner, view.name, result, patch,
                                     own_result(patch.apply(result)))
            if result_size(patched) > runner.limits.max_result_bytes:
                raise ValueError("the patched result is over the size limit")
        except Exception as exc:
            runner.recorder.record(ResultHandlerFailed(
                call_id=view.call_id, handler=handler_name(handler),
                error=error_info(exc, _text_limit(runner))))
            continue
        result = patched
    return result
