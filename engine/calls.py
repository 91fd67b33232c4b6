"""One call, in order: the path every call takes, the model's and nested ones alike.

Read top to bottom, this is DESIGN's "one call, in order":

1. ``requested`` is recorded by the caller (the batch, or ``ctx.execute_tool``);
2. :meth:`CallRunner.gate` checks availability and the arguments, asks the ``tool_call``
   handlers, then the policy, then (if it says ask) the approver;
3. :meth:`CallRunner.execute` records ``started``, runs the body under the tool's timeout,
   checks the output, chains the ``tool_result`` handlers and records the one terminal event.

:meth:`CallRunner.guard` wraps both so that whatever escapes (cancellation above all) still
closes the call and its nested calls, shielded, before it propagates. Which event may follow
which is not decided here but in :mod:`engine.lifecycle`, which the recorder enforces.
"""

from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

from events.results import ErrorInfo, TextContent, ToolResult, error_result
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
    FailureKind,
    PolicyDecided,
    ResultHandlerFailed,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
)

from .approvals import ApprovalRequest, Approver, as_decision
from .context import ToolContext
from .handlers import (
    Block,
    ResultPatch,
    Rewrite,
    ToolCallEvent,
    ToolCallHandler,
    ToolResultEvent,
    ToolResultHandler,
    handler_name,
)
from .jsonvalues import copy_json, ensure_json, own_result
from .policy import PolicyRules, decide
from .recorder import Recorder
from .registry import Registry
from .tools import ToolCall, ToolSpec, may_call

__all__ = ["CallRunner", "Gated"]

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class Gated:
    """A call the gate let through: the tool and the final arguments."""

    call_id: str
    spec: ToolSpec
    arguments: Any
    origin: str
    parent_id: str | None


def _error_info(exc: BaseException) -> ErrorInfo:
    return ErrorInfo(
        type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
    )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class CallRunner:
    """Runs calls for one session; holds what every call consults."""

    def __init__(
        self,
        recorder: Recorder,
        registry: Registry,
        *,
        approver: Approver,
        rules: PolicyRules,
        max_depth: int,
    ) -> None:
        self.recorder = recorder
        self.registry = registry
        self.approver = approver
        self.rules = rules
        self.max_depth = max_depth
        self.call_handlers: list[ToolCallHandler] = []
        self.result_handlers: list[ToolResultHandler] = []

    # -- ending a call ----------------------------------------------------------------------

    def fail(
        self,
        call_id: str,
        kind: FailureKind,
        message: str,
        *,
        text: str | None = None,
        error: ErrorInfo | None = None,
        returned: ToolResult | None = None,
        result: ToolResult | None = None,
    ) -> ToolResult:
        """End ``call_id`` as failed; ``text`` is what the caller reads (default: message)."""
        result = result or error_result(text or message)
        self.recorder.record(
            ToolCallFailed(
                call_id=call_id, kind=kind, message=message, result=result,
                error=error, returned=returned,
            )
        )
        return result

    def close_open(self, root: str, reason: str) -> None:
        """Cancel ``root`` and every open call below it, the deepest first."""
        projection = self.recorder.projection
        prefix = root + "/"
        for call_id in reversed(projection.open_calls):
            if call_id == root or call_id.startswith(prefix):
                name = projection.calls[call_id].name
                self.recorder.record(
                    ToolCallCancelled(
                        call_id=call_id, reason=reason,
                        result=error_result(f"{name} was cancelled ({reason})"),
                    )
                )

    async def guard(self, call_id: str, step: Callable[[], Awaitable[T]]) -> T:
        """Run ``step``; if anything escapes it, close the call's subtree first (shielded)."""
        try:
            return await step()
        except BaseException as exc:
            reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                f"interrupted by {type(exc).__name__}: {exc}"
            )
            with trio.CancelScope(shield=True):
                self.close_open(call_id, reason)
                await self.recorder.flush()
            raise

    def result_of(self, call_id: str) -> ToolResult:
        """The result a closed call ended with."""
        result = self.recorder.projection.calls[call_id].result
        assert result is not None, f"call {call_id} is still open"
        return result

    # -- steps 2-5: the gate ----------------------------------------------------------------

    async def gate(self, request: ToolCallRequested) -> Gated | None:
        """Availability, arguments, handlers, policy, approval. ``None``: the call has ended."""
        call_id, name = request.call_id, request.name
        projection = self.recorder.projection
        spec = self.registry.specs.get(name)
        if spec is None or not may_call(spec.exposure, name in projection.active_tools, request.origin):
            why = "no tool has that name" if spec is None else (
                f"its exposure {spec.exposure!r} does not let a {request.origin} call use it now"
            )
            self.fail(call_id, "unavailable", f"Tool {name} is not available: {why}",
                      text=f"Tool {name} is not available")
            return None
        if call_id.count("/") > self.max_depth:
            self.fail(call_id, "depth_limit",
                      f"nested calls may go {self.max_depth} deep; {call_id} is deeper")
            return None
        arguments = request.arguments
        if not self._valid_arguments(call_id, spec, arguments, after=None):
            return None

        for handler in self.call_handlers:
            by = handler_name(handler)
            event = ToolCallEvent(call_id=call_id, name=name, arguments=copy_json(arguments),
                                  origin=request.origin, parent_id=request.parent_id)
            try:
                verdict = await _maybe_await(handler(event))
                if verdict is not None and not isinstance(verdict, (Block, Rewrite)):
                    raise TypeError(f"returned {verdict!r}; return None, Block or Rewrite")
                if isinstance(verdict, Rewrite):
                    ensure_json(verdict.arguments)
            except Exception as exc:
                reason = f"the tool_call handler {by} failed ({type(exc).__name__}: {exc})"
                self._block(call_id, name, reason, by)
                return None
            if isinstance(verdict, Block):
                self._block(call_id, name, verdict.reason, by)
                return None
            if isinstance(verdict, Rewrite):
                arguments = copy_json(verdict.arguments)
                self.recorder.record(ToolCallRewritten(call_id=call_id, arguments=arguments, by=by))
                if not self._valid_arguments(call_id, spec, arguments, after=by):
                    return None

        verdict_ = decide(name, spec.annotations, rules=self.rules,
                          session_grants=projection.session_grants)
        self.recorder.record(
            PolicyDecided(call_id=call_id, decision=verdict_.decision, reason=verdict_.reason)
        )
        if verdict_.decision == "deny":
            self._deny(call_id, name, verdict_.reason, "policy", f"{name} was denied: {verdict_.reason}")
            return None
        if verdict_.decision == "ask":
            arguments = await self._ask(request, spec, arguments, verdict_.reason)
            if arguments is _ENDED:
                return None
        return Gated(call_id=call_id, spec=spec, arguments=arguments,
                     origin=request.origin, parent_id=request.parent_id)

    def _valid_arguments(self, call_id: str, spec: ToolSpec, arguments: Any, *, after: str | None) -> bool:
        problem = self.registry.inputs[spec.name].violation(arguments)
        if problem is None:
            return True
        where = f" (after the rewrite by {after})" if after else ""
        self.fail(call_id, "invalid_arguments", f"Invalid arguments for {spec.name}{where}: {problem}")
        return False

    def _block(self, call_id: str, name: str, reason: str, by: str) -> None:
        self.recorder.record(ToolCallBlocked(
            call_id=call_id, reason=reason, by=by,
            result=error_result(f"{name} was blocked: {reason}"),
        ))

    def _deny(self, call_id: str, name: str, reason: str, by: Any, text: str) -> None:
        self.recorder.record(ToolCallDenied(call_id=call_id, reason=reason, by=by,
                                            result=error_result(text)))

    async def _ask(self, request: ToolCallRequested, spec: ToolSpec, arguments: Any, reason: str) -> Any:
        call_id, name = request.call_id, request.name
        self.recorder.record(ApprovalRequested(call_id=call_id, reason=reason))
        await self.recorder.flush()
        asked = ApprovalRequest(call_id=call_id, name=name, arguments=copy_json(arguments),
                                reason=reason, annotations=spec.annotations,
                                origin=request.origin, parent_id=request.parent_id)
        try:
            decision = as_decision(await self.approver(asked))
            if decision.granted is True and decision.arguments is not None:
                ensure_json(decision.arguments)
        except Exception as exc:
            decision = as_decision(False)
            decision = attrs.evolve(decision, reason=f"the approver failed ({type(exc).__name__}: {exc})")
        edited = decision.granted and decision.arguments is not None
        if edited:
            arguments = copy_json(decision.arguments)
            self.recorder.record(ToolCallRewritten(call_id=call_id, arguments=arguments, by="approver"))
        self.recorder.record(ApprovalResolved(call_id=call_id, granted=decision.granted,
                                              scope=decision.scope, reason=decision.reason))
        if not decision.granted:
            self._deny(call_id, name, decision.reason or "the approver refused", "approver",
                       f"{name} was not approved")
            return _ENDED
        if edited and not self._valid_arguments(call_id, spec, arguments, after="approver"):
            return _ENDED
        return arguments

    # -- steps 6-8: running the body ------------------------------------------------------

    async def execute(self, gated: Gated) -> ToolResult:
        """Run the tool body and record the call's terminal event."""
        call_id, spec = gated.call_id, gated.spec
        self.recorder.record(ToolExecutionStarted(call_id=call_id))
        await self.recorder.flush()
        call = ToolCall(call_id=call_id, name=spec.name, arguments=copy_json(gated.arguments),
                        origin=gated.origin, parent_id=gated.parent_id)  # type: ignore[arg-type]
        ctx = ToolContext(self, call)
        failure: tuple[FailureKind, str, ErrorInfo | None] | None = None
        returned: Any = None
        try:
            with trio.move_on_after(spec.timeout if spec.timeout is not None else float("inf")) as scope:
                returned = await spec.execute(call, ctx)
            if scope.cancelled_caught:
                failure = ("timeout", f"{spec.name} timed out after {spec.timeout} s", None)
        except Exception as exc:
            error = _error_info(exc)
            failure = ("raised", f"{spec.name} failed: {error.type}: {error.message}", error)
        finally:
            ctx.close()

        raw: ToolResult | None = None
        if failure is None:
            raw, failure = self._check_output(spec, returned)
        if failure is None:
            assert raw is not None
            result = await self._result_handlers(gated, raw)
            self.recorder.record(ToolCallCompleted(
                call_id=call_id, result=result, returned=None if result == raw else raw))
        else:
            kind, message, info = failure
            result = await self._result_handlers(gated, error_result(message))
            self.fail(call_id, kind, message, error=info, returned=raw, result=result)
        await self.recorder.flush()
        return result

    def _check_output(self, spec: ToolSpec, returned: Any) -> tuple[ToolResult | None, Any]:
        if not isinstance(returned, ToolResult):
            return None, ("invalid_output", f"{spec.name} returned {type(returned).__name__}, "
                          f"not a ToolResult", None)
        try:
            result = own_result(returned)
        except ValueError as exc:
            return None, ("not_serialisable", f"{spec.name} returned a result that is not JSON: {exc}", None)
        validator = self.registry.outputs.get(spec.name)
        if validator is not None and not result.is_error:
            if result.structured_content is None:
                return result, ("invalid_output", f"{spec.name} declares an output schema but "
                                "returned no structured content", None)
            problem = validator.violation(result.structured_content)
            if problem is not None:
                return result, ("invalid_output", f"{spec.name} returned output that violates "
                                f"its output schema: {problem}", None)
        if result.structured_content is not None and not result.content:
            block = TextContent(text=json.dumps(result.structured_content, ensure_ascii=False))
            result = attrs.evolve(result, content=(block,))
        return result, None

    async def _result_handlers(self, gated: Gated, result: ToolResult) -> ToolResult:
        for handler in self.result_handlers:
            event = ToolResultEvent(call_id=gated.call_id, name=gated.spec.name,
                                    arguments=copy_json(gated.arguments),
                                    origin=gated.origin, parent_id=gated.parent_id,  # type: ignore[arg-type]
                                    result=own_result(result))
            try:
                patch = await _maybe_await(handler(event))
                if patch is None:
                    continue
                if not isinstance(patch, ResultPatch):
                    raise TypeError(f"returned {patch!r}; return None or a ResultPatch")
                patched = own_result(patch.apply(result))
            except Exception as exc:
                self.recorder.record(ResultHandlerFailed(
                    call_id=gated.call_id, handler=handler_name(handler), error=_error_info(exc)))
                continue
            result = patched
        return result

    # -- nested calls -----------------------------------------------------------------------

    async def run_nested(self, parent: ToolCall, index: int, name: str, arguments: Any) -> ToolResult:
        """A nested call, start to end, in the parent's task. Returns its result; raises only
        if it is cancelled."""
        call_id = f"{parent.call_id}/{index}"
        problem = None
        try:
            ensure_json(arguments)
            arguments = copy_json(arguments)
        except ValueError as exc:
            problem, arguments = str(exc), None
        request = ToolCallRequested(call_id=call_id, name=str(name), arguments=arguments,
                                    origin="nested", parent_id=parent.call_id)
        self.recorder.record(request)

        async def run() -> ToolResult:
            if problem is not None:
                return self.fail(call_id, "invalid_arguments",
                                 f"Invalid arguments for {name}: not JSON ({problem})")
            gated = await self.gate(request)
            if gated is None:
                return self.result_of(call_id)
            return await self.execute(gated)

        return await self.guard(call_id, run)


_ENDED: Any = object()

