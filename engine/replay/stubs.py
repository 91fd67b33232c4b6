"""Recorded tools: a tool's declaration with a body that gives back what the log says.

In ``--tools recorded`` mode every tool of the log is registered again (from its recorded
snapshot, or from today's spec when one is given) with :meth:`RecordedTools.execute` as its
body. For the call it is running, the body

1. makes the call's recorded nested calls again, in order, with the arguments they were
   requested with (``ctx.execute_tool``: so today's handlers and policy judge them again), and
   reports the recorded progress (forwarding, as recorded, what it forwarded of a nested
   call's) and activates the recorded tools in between;
2. then ends as the call ended: returns what the tool returned (the terminal event's
   ``returned`` if a result handler changed it, else its ``result``); raises an exception with
   the recorded type name and message; sleeps until the tool's timeout fires; returns the
   recorded invalid value, or a result as large as the recorded one that was over the size
   limit; or waits where the recorded call was stopped from outside.

What the body gives back is read from fields, never from a message: the returned value's type
and what made a value not JSON are in the failure's :class:`~events.types.FailureDetail`, a
raised exception's type and message in its :class:`~events.results.ErrorInfo`.

A value that was not JSON is not in the log, only where and why it was not; the body builds a
value that makes the engine say the same thing again (:func:`not_json_value`). The detail is
input like any part of a log: a path that would need a list longer than
:data:`MAX_REBUILT_ITEMS` (``[4000000000]`` in an edited log), or nesting deeper than a JSON
value may have, is not rebuilt, and the replay reports the different message as a divergence.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from events.artifacts import decode_artifact
from events.results import ToolResult
from events.stores.base import ArtifactStore
from events.types import (
    FailureDetail,
    QuestionAsked,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallRequested,
    ToolProgress,
    ToolsActivated,
)

from ..core.jsonvalues import MAX_DEPTH
from ..core.limits import sized_result
from ..core.toolcontext import ToolContext
from ..core.tools import ToolCall, ToolSpec
from .recorded import RecordedCall, RecordedSession
from .watch import Watch

__all__ = [
    "MAX_REBUILT_BYTES",
    "MAX_REBUILT_ITEMS",
    "NoRecordedResult",
    "RecordedTools",
    "not_json_value",
    "recorded_exception",
]

#: The most list items :func:`not_json_value` makes to rebuild a recorded path (the indices
#: along it, added up): enough for any result a tool really returned, small enough that an
#: edited index cannot make a replay allocate what the message asks for.
MAX_REBUILT_ITEMS = 100_000
#: The largest result (bytes of text) the body makes to be over the size limit again, as a
#: recorded ``too_large`` result was: a size past it (an edited log) is not rebuilt.
MAX_REBUILT_BYTES = 1 << 24


class NoRecordedResult(Exception):
    """A recorded tool was asked to run a call whose body never ran in the log."""


def recorded_exception(type_name: str, message: str) -> Exception:
    """An exception whose type is named ``type_name`` and whose ``str`` is ``message``."""
    cls = type(type_name, (Exception,), {"__str__": lambda self: message})
    return cls(message)  # type: ignore[no-any-return]


class _Named:
    """A key whose ``repr`` is given: rebuilds "object key 1 is not a string"."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text


def _unbuilt() -> Any:
    """What a detail that cannot be rebuilt gives: some value that is not JSON."""
    return {"value": object()}


def not_json_value(detail: FailureDetail | None) -> Any:
    """A value that :func:`engine.core.jsonvalues.ensure_json` refuses as ``detail`` says, e.g.
    ``FailureDetail(path=("n",), problem="type", type="set")`` (the engine's words for it:
    ``"$.n: a set is not a JSON value"``); an arbitrary non-JSON value if it cannot be
    rebuilt."""
    path = detail.path if detail is not None else None
    if detail is None or path is None or len(path) > MAX_DEPTH:  # deeper than JSON may be
        return _unbuilt()
    if any(type(step) is int and step < 0 for step in path) or sum(
            step for step in path if type(step) is int) > MAX_REBUILT_ITEMS:
        return _unbuilt()
    bad: Any
    if detail.problem == "type" and detail.type is not None:
        name = detail.type
        bad = type(name, (), {})() if name != "NoneType" else object()
    elif detail.problem == "number" and detail.value is not None:
        try:
            bad = float(detail.value)
        except ValueError:
            return _unbuilt()
    elif detail.problem == "key" and detail.value is not None:
        # the key is reported at the path of the object that holds it
        bad = {_Named(detail.value): None}
    elif detail.problem == "depth" and len(path) == MAX_DEPTH:
        bad = []  # a container where a value is MAX_DEPTH deep: one level too many
    else:
        return _unbuilt()
    value = bad
    for step in reversed(path):
        value = {step: value} if isinstance(step, str) else [None] * step + [value]
    return value


def _nested_arguments(child: RecordedCall) -> Any:
    """The arguments a nested call was requested with; for arguments that were not JSON (the
    log holds ``null`` and the failure's detail), a value the engine refuses the same way."""
    arguments = child.requested.arguments
    terminal = child.terminal
    if arguments is None and isinstance(terminal, ToolCallFailed) and \
            terminal.kind == "invalid_arguments" and terminal.detail is not None:
        return not_json_value(terminal.detail)
    return arguments


class _NotAToolResult:
    """Stands for a returned value that was not a ToolResult (its type name is rebuilt)."""


class RecordedTools:
    """The bodies of recorded tools, for one replay."""

    def __init__(self, book: RecordedSession, watch: Watch, timeouts: dict[str, float | None],
                 artifacts: ArtifactStore | None = None) -> None:
        self.book = book
        self.watch = watch
        #: the store that keeps the log's artifacts (the whole of results too large for it)
        self.artifacts = artifacts
        #: each tool's timeout in the replay, by name (a recorded timeout needs one)
        self.timeouts = timeouts

    def body_for(self, spec: ToolSpec) -> ToolSpec:
        """``spec``'s declaration with the recorded body."""
        return attrs.evolve(spec, execute=self.execute)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Redo the recorded call's nested calls, progress and questions, then end as it
        ended."""
        recorded = self.book.calls.get(call.call_id)
        if recorded is None or recorded.name != call.name or not recorded.started:
            raise NoRecordedResult(
                f"{call.name} did not run as call {call.call_id} in the log, so the replay has "
                f"no result to give (run it with --tools live to see what it does now)"
            )
        for step in recorded.body:
            if isinstance(step, ToolProgress):
                if step.source is None:
                    ctx.report_progress(step.message, step.data, progress=step.progress,
                                        total=step.total, content=step.content)
                else:
                    try:
                        ctx.forward_progress(step)  # from the same nested call, made again
                    except ValueError:
                        pass  # that call was not made now: the missing event is the divergence
            elif isinstance(step, ToolsActivated):
                try:
                    ctx.activate(step.names)
                except ValueError:
                    pass  # not a tool it may activate now: the missing event is the divergence
            elif isinstance(step, QuestionAsked):
                # answered from the log (RecordedAsker); what the tool did with the answer is
                # in what it did next, which this body redoes as recorded
                await ctx.ask(step.message, step.schema)
            else:
                await self._nested(ctx, recorded, step)
        return await self._end(call, recorded)

    async def _nested(self, ctx: ToolContext, parent: RecordedCall, step: ToolCallRequested) -> None:
        child = self.book.calls[step.call_id]
        arguments = _nested_arguments(child)
        waiter = self.book.chain_waiter(child.call_id) if child.cancelled else None
        if not child.cancelled or parent.cancelled or (
            waiter is not None and waiter.cause != "scope"
        ):
            await ctx.execute_tool(step.name, arguments)
            return
        # the parent stopped this nested call itself (its own cancel scope) and went on: run
        # it under a scope that is cancelled once it waits where it was stopped
        scope = trio.CancelScope()
        finished = False

        async def run() -> None:
            nonlocal finished
            with scope:
                await ctx.execute_tool(step.name, arguments)
            finished = True
            self.watch.poke()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            if waiter is not None:
                await self.watch.until(lambda: finished or self.watch.reached(waiter))
            scope.cancel()

    async def _whole(self, call: ToolCall, terminal: ToolCallCompleted) -> ToolResult:
        """What the tool returned, when the model read it whole or cut: the whole result, from
        the record or from the artifact the log's store keeps."""
        kept = terminal.kept
        if kept is None:
            return terminal.result
        if kept.whole is not None:
            return kept.whole
        if self.artifacts is None:
            raise NoRecordedResult(
                f"the whole result of call {call.call_id} ({call.name}) is an artifact of the "
                f"log's store, and the replay was not given the store (redrive(..., "
                f"artifacts=store))")
        data = await self.artifacts.get_artifact(self.book.session_id, call.call_id,
                                                 kept.sha256)
        return decode_artifact(data, self.book.session_id, call.call_id, kept.sha256)

    async def _end(self, call: ToolCall, recorded: RecordedCall) -> ToolResult:
        terminal = recorded.terminal
        if recorded.call_id in self.book.waiters:
            self.watch.mark_waiting(call.call_id)
            await trio.sleep_forever()
        if terminal is None:
            raise NoRecordedResult(
                f"the log ends while call {call.call_id} ({call.name}) ran: it has no result")
        if isinstance(terminal, ToolCallCompleted):
            if terminal.returned is not None:
                return terminal.returned
            return await self._whole(call, terminal)
        if isinstance(terminal, ToolCallFailed):
            kind = terminal.kind
            if kind == "raised" and terminal.error is not None:
                raise recorded_exception(terminal.error.type, terminal.error.message)
            if kind == "timeout":
                if self.timeouts.get(call.name) is None:
                    raise NoRecordedResult(
                        f"{call.name} timed out in the log, and has no timeout now")
                await trio.sleep_forever()
            if kind == "invalid_output":
                if terminal.returned is not None:
                    return terminal.returned
                name = terminal.detail.type if terminal.detail is not None else None
                if name == "NoneType":
                    return None  # type: ignore[return-value]
                return type(name or "object", (_NotAToolResult,), {})()  # type: ignore[no-any-return]
            if kind == "not_serialisable":
                return ToolResult(structured_content=not_json_value(terminal.detail))
            size = terminal.detail.size if terminal.detail is not None else None
            if kind == "too_large" and size is not None and 0 <= size <= MAX_REBUILT_BYTES:
                return sized_result(size)  # as many bytes as it was
        raise NoRecordedResult(
            f"call {call.call_id} ({call.name}) ended as "
            f"{type(terminal).__name__ if terminal else 'nothing'} in the log: the replay "
            f"cannot make a body end that way"
        )
