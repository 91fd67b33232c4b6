"""One call, in order: the path every call takes, the model's and nested ones alike.

:meth:`CallRunner.advance` carries a call forward **from the state its log is in**: a fresh
call and one interrupted half-way (by a pause for approval, or a process that stopped) take
the same path, so nothing that the log already settled is asked or run again. Each step is in
its own module, read top to bottom as DESIGN's "one call, in order":

1. ``requested`` is recorded by the caller (the batch, or ``ctx.execute_tool``);
2. :func:`engine.gate.gate`: availability, arguments, ``tool_call`` handlers, the policy;
3. :func:`engine.gate.ask`: the approver, if the policy said ask (it may answer later);
4. :func:`engine.execution.execute`: ``started``, the body under the tool's timeout, the output
   check, the ``tool_result`` handlers and the one terminal event.

:meth:`CallRunner.advance` also makes sure that whatever escapes (cancellation above all) still
closes the call and its nested calls, shielded, before it propagates. Which event may follow
which is decided in :mod:`engine.lifecycle`, which the recorder enforces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from events.results import ErrorInfo, ToolResult, error_result
from events.types import (
    FailureDetail,
    FailureKind,
    ToolCallCancelled,
    ToolCallFailed,
    ToolCallRequested,
    ToolExecutionStarted,
    ToolRegistered,
)

from .approvals import ApprovalDecision, Approver
from .execution import describe, execute
from .gate import ask, deny_refused, gate, resolve
from .handlers import ToolCallHandler, ToolResultHandler
from .jsonvalues import NotJson, ensure_json, own_json
from .lifecycle import CallState
from .limits import Limits, admit
from .nested import NestedCalls, first_difference
from .policy import PolicyRules
from .recorder import Recorder
from .registry import Registry
from .tools import ToolCall

__all__ = ["CallRunner"]

class CallRunner:
    """Runs calls for one session; holds what every call consults, and which calls of this
    process are running or waiting for an approval."""

    def __init__(
        self,
        recorder: Recorder,
        registry: Registry,
        *,
        approver: Approver,
        rules: PolicyRules,
        max_depth: int,
        limits: Limits = Limits(),
    ) -> None:
        self.recorder = recorder
        self.registry = registry
        self.approver = approver
        self.rules = rules
        self.max_depth = max_depth
        self.limits = limits
        self.call_handlers: list[ToolCallHandler] = []
        self.result_handlers: list[ToolResultHandler] = []
        #: top-level calls whose body runs in a task of this process
        self.live: dict[str, None] = {}
        #: set when the session closes with work in flight: leave the log as a stop would
        self.suspending = False
        self._waiters: dict[str, trio.Event] = {}
        self._nested: dict[str, None] = {}  # nested calls being carried forward here
        #: calls whose approver is deciding now (in this process): not pending for the host
        self.asking: dict[str, None] = {}
        self._change: trio.Event | None = None  # made when someone waits for a change
        #: called at a change while some call waits for an answer (the batch watches for a
        #: pause while a prompt waits)
        self.on_change: Callable[[], None] | None = None

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
        detail: FailureDetail | None = None,
    ) -> ToolResult:
        """End ``call_id`` as failed; ``text`` is what the caller reads (default: message)."""
        result = result or error_result(text or message)
        self.recorder.record(ToolCallFailed(call_id=call_id, kind=kind, message=message,
                                            result=result, error=error, returned=returned,
                                            detail=detail))
        return result

    def close_open(self, root: str, reason: str, *, include_root: bool = True) -> None:
        """Cancel the open calls below ``root`` (and ``root`` itself), the deepest first."""
        projection = self.recorder.projection
        prefix = root + "/"
        for call_id in reversed(projection.open_calls):
            if (include_root and call_id == root) or call_id.startswith(prefix):
                name = projection.live_calls[call_id].name
                self.recorder.record(ToolCallCancelled(
                    call_id=call_id, reason=reason,
                    result=error_result(f"{name} was cancelled ({reason})"),
                ))

    # -- carrying a call forward --------------------------------------------------------------

    async def advance(self, call_id: str, *, wait: bool, gate_only: bool = False) -> ToolResult | None:
        """Take the call from where the log says it is to its end, and return its result.

        Returns ``None`` when it cannot go on yet: it waits for an approval and ``wait`` is
        false (a top-level call: the session pauses), or ``gate_only`` stops it once allowed
        (a batch gates every call before running any). With ``wait``, a pending approval is
        awaited in this task (a nested call: its parent is parked until the host answers).

        Whatever escapes (a cancellation above all) first closes the call and its nested
        calls, shielded, then propagates. When the session is closing with the call in flight
        (``suspending``), nothing is recorded: the log stays as a stopped process would leave
        it, to be resumed.
        """
        calls = self.recorder.projection.live_calls
        try:
            while True:
                view = calls[call_id]
                state = view.state
                if state is CallState.CLOSED:
                    assert view.result is not None
                    return view.result
                if state is CallState.REQUESTED:
                    await gate(self, view)
                elif state is CallState.ASKING:
                    await ask(self, view)
                elif state is CallState.AWAITING:
                    if not wait:
                        return None
                    await self._park(call_id)
                elif state is CallState.DENYING:
                    deny_refused(self, view)
                elif gate_only:
                    return None
                elif state is CallState.ALLOWED:
                    return await execute(self, view)
                else:  # RUNNING, with no task of this process running it: it was interrupted
                    return await self._again(call_id)
        except BaseException as exc:
            if not self.suspending:
                reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                    f"interrupted by {describe(exc)}")
                with trio.CancelScope(shield=True):
                    self.close_open(call_id, reason)
                    await self.recorder.flush()
            raise

    async def _again(self, call_id: str) -> ToolResult:
        """A body that started in an earlier process and has no result: run it again if its
        tool is idempotent (its nested calls are answered from the log), else end it.

        The re-run records a new ``started`` and writes it before the body runs, like a first
        run: a second process re-entering the same call at the same time then gets the store's
        ``ConflictError`` (its session stops) instead of running the body a second time."""
        view = self.recorder.projection.live_calls[call_id]
        spec = self.registry.specs.get(view.name)
        if (spec is not None and spec.annotations.idempotent is True
                and self._idempotent_when_started(call_id, view.name)):
            return await execute(self, view)
        self.close_open(call_id, "interrupted", include_root=False)
        return self.fail(
            call_id, "interrupted",
            f"{view.name} was interrupted: the process stopped while it ran, and it was not "
            f"run again because it is not declared idempotent",
        )

    def _idempotent_when_started(self, call_id: str, name: str) -> bool:
        """Whether the version of the tool that started the call declared itself idempotent:
        a new version cannot make an old, half-run call safe to run again. (Only a restart
        asks, so reading the log backwards costs nothing that matters.)"""
        started = False
        for record in reversed(self.recorder.history):
            event = record.event
            if not started:
                started = isinstance(event, ToolExecutionStarted) and event.call_id == call_id
            elif isinstance(event, ToolRegistered) and event.spec.name == name:
                return event.spec.annotations.idempotent is True
        return False

    def resolve(self, call_id: str, decision: ApprovalDecision) -> None:
        """Answer a pending approval (the host's answer); wakes a nested call waiting for it."""
        view = self.recorder.projection.live_calls.get(call_id)
        if call_id in self.asking:
            raise ValueError(f"call {call_id}: its approver is still deciding; answer a "
                             f"request only once it is pending (session.pending_approvals())")
        if view is None or view.state is not CallState.AWAITING:
            state = "unknown" if view is None else view.status
            raise ValueError(
                f"call {call_id} is not waiting for an approval (it is {state}); "
                f"pending: {', '.join(self.recorder.projection.pending_approvals) or 'none'}"
            )
        if decision.granted and decision.arguments is not None:
            ensure_json(decision.arguments)
        resolve(self, call_id, decision, later=True)
        if call_id in self._waiters:
            self._unpark(call_id)

    # -- waiting, and knowing when everything waits -----------------------------------------

    async def _park(self, call_id: str) -> None:
        waiter = trio.Event()
        self._waiters[call_id] = waiter
        self.changed()
        try:
            await waiter.wait()
        finally:
            if self._waiters.get(call_id) is waiter:  # cancelled, not answered
                self._unpark(call_id)

    def _unpark(self, call_id: str) -> None:
        # counted as moving again at once, not when its task next runs: whoever waits for the
        # batch to settle must not see it as still waiting in between
        waiter = self._waiters.pop(call_id)
        self.changed()
        waiter.set()

    def changed(self) -> None:
        """Wake whoever waits in :meth:`settled` or :meth:`next_change`."""
        if self._change is not None:
            self._change.set()
            self._change = None
        if self._waiters and self.on_change is not None:  # no pause without a waiter
            self.on_change()

    async def next_change(self) -> None:
        """Wait for the next change of which calls run or wait."""
        if self._change is None:
            self._change = trio.Event()
        await self._change.wait()

    def quiet(self) -> bool:
        """Whether no call of this process can make progress on its own (see :meth:`settled`)."""
        if not self._waiters:  # the deepest running call waits for an answer, or nothing runs
            return not self.live and not self._nested
        running = (*self.live, *self._nested)
        for call_id in running:
            if call_id in self._waiters:
                continue  # waits for an answer
            below = call_id + "/"
            if any(other.startswith(below) for other in running):
                continue  # waits for a nested call of its own
            return False  # runs, or its approver is still deciding
        return True

    async def settled(self) -> None:
        """Return once no call of this process can make progress on its own: every call
        running here has finished, waits for an answer to its approval, or waits for a nested
        call that does. (A tool body that waits for a nested call while it also does other work
        in a task of its own counts as waiting.)"""
        while not self.quiet():
            await self.next_change()

    # -- nested calls -----------------------------------------------------------------------

    async def run_nested(
        self, parent: ToolCall, nested: NestedCalls, name: str, arguments: Any
    ) -> tuple[str, ToolResult]:
        """A nested call, start to end, in the parent's task. Returns its id and result;
        raises only if it is cancelled. A call the log already holds for this request (the
        parent runs again after a restart, :mod:`engine.nested`) continues from its state:
        never run twice, never handed to another request."""
        problem: ValueError | None = None
        try:
            arguments = admit(own_json(arguments), self.limits)
        except ValueError as exc:
            problem, arguments = exc, None
        name = str(name)
        claim = nested.claim(name, arguments, decide=False)
        if claim is None:
            # another call of this tool is recorded unanswered: a sibling of this request may
            # be about to ask for it (engine.nested). Let every task that can run, run first.
            await trio.testing.wait_all_tasks_blocked()
            claim = nested.claim(name, arguments, decide=True)
            assert claim is not None
        call_id = claim.call_id
        if not claim.recorded:
            self.recorder.record(ToolCallRequested(call_id=call_id, name=name,
                                                   arguments=arguments, origin="nested",
                                                   parent_id=parent.call_id))
            if problem is not None:
                return call_id, self.fail(
                    call_id, "invalid_arguments",
                    f"Invalid arguments for {name}: not JSON ({problem})",
                    detail=problem.detail if isinstance(problem, NotJson) else None)
            if claim.differs_from is not None:
                return call_id, self._mismatch(parent, call_id, claim.differs_from, arguments)
        self._nested[call_id] = None
        try:
            result = await self.advance(call_id, wait=True)
        finally:
            del self._nested[call_id]
            self.changed()
        assert result is not None
        return call_id, result

    def _mismatch(
        self, parent: ToolCall, call_id: str, recorded_id: str, arguments: Any
    ) -> ToolResult:
        """End a request of a body that runs again, which differs from what its first run
        asked that tool: neither the recorded result nor a new run answers it."""
        recorded = self.recorder.projection.live_calls[recorded_id]
        name = recorded.name
        return self.fail(
            call_id, "mismatch",
            f"{name} was not run: when {parent.name} ({parent.call_id}) first ran, it asked "
            f"{name} for other arguments (call {recorded_id}), "
            f"{first_difference(recorded.requested_arguments, arguments)}. A body that runs "
            f"again after a restart must ask for the same nested calls; a recorded result "
            f"answers only the same call, and this one may repeat what {recorded_id} did",
        )
