"""The session: one log stream, and the agent loop that writes it.

``prompt`` reads top to bottom like the loop it runs: record the user's message, ask the model,
record its answer, run its tool calls as a batch, repeat until a message without calls or
``max_turns``. A batch is gated in the assistant's order (so every approval it needs is asked
in that order), then the allowed calls run together in one nursery, or one after another if
any of their tools is ``sequential``. A call that fails becomes that call's error result; it
never cancels its siblings. The rules of one call live in :mod:`engine.calls`, the rules of
which event may follow which in :mod:`engine.lifecycle`.

The session runs inside the host's trio loop: it starts no loop and no thread, and leaves no
task behind when :meth:`Session.open`'s block ends.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import attrs
import trio

from events.stores import EventStore
from events.types import (
    ActiveToolsSet,
    AssistantMessage,
    ModelToolCall,
    Record,
    SessionStarted,
    ToolCallRequested,
    ToolRegistered,
    ToolSnapshot,
    UserMessage,
)

from .approvals import Approver, deny_all
from .calls import CallRunner, Gated
from .handlers import ToolCallHandler, ToolResultHandler
from .jsonvalues import copy_json, ensure_json
from .models import Model, ModelMessage, ModelRequest
from .policy import PolicyRules
from .recorder import Recorder
from .reducers import CallView, Projection, TranscriptView, fold
from .registry import Registry
from .tools import ToolSpec

__all__ = ["PromptResult", "Session"]


@attrs.frozen(kw_only=True)
class PromptResult:
    """How a prompt ended: ``"end_turn"`` (a message without calls) or ``"max_turns"``."""

    stop: Literal["end_turn", "max_turns"]
    turns: int
    text: str


def _json_or_none(arguments: Any) -> Any:
    """A private copy of a model's arguments, or ``None`` if they are not JSON (the call then
    fails validation; the log can hold only JSON)."""
    try:
        ensure_json(arguments)
    except ValueError:
        return None
    return copy_json(arguments)


def _new_session_id() -> str:
    return uuid.uuid4().hex


class Session:
    """One agent session over one log stream. Open it with :meth:`Session.open`."""

    def __init__(
        self,
        recorder: Recorder,
        runner: CallRunner,
        model: Model,
        *,
        max_turns: int,
    ) -> None:
        self._recorder = recorder
        self._runner = runner
        self._model = model
        self._max_turns = max_turns
        self._prompting = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        store: EventStore,
        *,
        model: Model,
        tools: Iterable[ToolSpec] = (),
        approver: Approver = deny_all,
        rules: PolicyRules = PolicyRules(),
        session_id: str | None = None,
        max_turns: int = 50,
        max_depth: int = 8,
        clock: Callable[[], float] = time.time,
        new_session_id: Callable[[], str] = _new_session_id,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[Session]:
        """Open a session on ``store``: a new one, or the one ``session_id`` names.

        Tools are checked before anything is written (a bad schema raises ``SchemaError``
        naming the tool and the keyword). The approver answers when the policy says ask; the
        default refuses, so nothing dangerous runs unless the host says so. ``clock`` and
        ``new_session_id`` are injected so that tests and replays are deterministic.
        """
        registry = Registry()
        specs = list(tools)
        for spec in specs:
            registry.check(spec)
        names = Counter(spec.name for spec in specs)
        if duplicated := [name for name, count in names.items() if count > 1]:
            raise ValueError(f"two tools are named {duplicated[0]!r}: tool names must be unique")
        if max_depth < 0 or max_turns < 1:
            raise ValueError("max_depth must be >= 0 and max_turns >= 1")

        sid = session_id or new_session_id()
        history = await store.read(sid)
        projection = fold(history)
        recorder = Recorder(store, sid, projection, history, clock)
        runner = CallRunner(recorder, registry, approver=approver, rules=rules, max_depth=max_depth)
        session = cls(recorder, runner, model, max_turns=max_turns)
        if not history:
            recorder.record(SessionStarted(metadata=copy_json(dict(metadata or {}))))
        for spec in specs:
            session._register(spec)
        await recorder.flush()
        try:
            yield session
        finally:
            recorder.close()
            with trio.CancelScope(shield=True):
                await recorder.flush()

    # -- what the host reads ----------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """This session's id in the store."""
        return self._recorder.session_id

    @property
    def state(self) -> Projection:
        """The session's derived state (read-only views): equal to a fold of its log."""
        return self._recorder.projection

    @property
    def transcript(self) -> TranscriptView:
        """What the model saw: messages and one result per top-level call, nothing nested."""
        return self._recorder.projection.transcript

    @property
    def calls(self) -> Mapping[str, CallView]:
        """The call tree: every call by id, nested ones included (see ``CallView.parent_id``
        and ``session.state.children(call_id)``)."""
        return self._recorder.projection.calls

    @property
    def records(self) -> Sequence[Record]:
        """The session's log as recorded so far (read-only)."""
        return tuple(self._recorder.history)

    def follow(self, after: int = 0) -> AsyncIterator[Record]:
        """Iterate over the session's records (``seq > after``), live, until it closes.

        A slow follower reads at its own pace and misses nothing; it never slows the session.
        """
        return self._recorder.follow(after)

    # -- what the host changes ----------------------------------------------------------------

    def on_tool_call(self, handler: ToolCallHandler) -> ToolCallHandler:
        """Add a ``tool_call`` handler (runs in registration order). Usable as a decorator."""
        self._runner.call_handlers.append(handler)
        return handler

    def on_tool_result(self, handler: ToolResultHandler) -> ToolResultHandler:
        """Add a ``tool_result`` handler (chained in registration order). Usable as a decorator."""
        self._runner.result_handlers.append(handler)
        return handler

    async def register(self, spec: ToolSpec) -> None:
        """Register another tool (or a new version of one) while the session is open."""
        self._runner.registry.check(spec)
        self._register(spec)
        await self._recorder.flush()

    def _register(self, spec: ToolSpec) -> None:
        self._runner.registry.add(spec)
        snapshot = spec.snapshot()
        if self.state.tools.get(spec.name) != snapshot:
            self._recorder.record(ToolRegistered(spec=snapshot))

    async def set_active_tools(self, names: Iterable[str]) -> None:
        """Replace the set of active tools: the ones declared to the model.

        Hidden tools are ignored (they are never active); an unknown name is an error and
        nothing changes.
        """
        wanted = list(dict.fromkeys(names))
        specs = self._runner.registry.specs
        if unknown := [name for name in wanted if name not in specs]:
            raise ValueError(
                f"set_active_tools: no tool named {unknown[0]!r} is registered "
                f"(registered: {', '.join(sorted(specs)) or 'none'})"
            )
        active = tuple(name for name in wanted if specs[name].exposure != "hidden")
        self._recorder.record(ActiveToolsSet(names=active))
        await self._recorder.flush()

    def declared_tools(self) -> tuple[ToolSnapshot, ...]:
        """The tools declared to the model now: the active ones, in registration order."""
        active = self.state.active_tools
        return tuple(spec for name, spec in self.state.tools.items() if name in active)

    # -- the loop -------------------------------------------------------------------------------

    async def prompt(self, text: str) -> PromptResult:
        """Send the user's ``text`` and run the agent loop until the model stops calling
        tools, or ``max_turns`` assistant messages. Cancelling it (a host cancel scope) closes
        every open call as cancelled before the cancellation propagates."""
        if self._prompting:
            raise RuntimeError("a prompt is already running in this session: await it first")
        self._prompting = True
        try:
            self._recorder.record(UserMessage(text=text))
            for turns in range(1, self._max_turns + 1):
                request = ModelRequest(transcript=self.transcript, tools=self.declared_tools())
                reply = await self._model.complete(request)
                if not isinstance(reply, ModelMessage):
                    raise TypeError(f"the model returned {reply!r}, not a ModelMessage")
                turn = self.state.turn + 1
                reply = attrs.evolve(reply, tool_calls=[
                    attrs.evolve(call, arguments=_json_or_none(call.arguments))
                    for call in reply.tool_calls
                ])
                self._recorder.record(AssistantMessage(
                    turn=turn, text=reply.text, tool_calls=reply.tool_calls,
                    stop_reason=reply.stop_reason,
                ))
                if not reply.tool_calls:
                    return PromptResult(stop="end_turn", turns=turns, text=reply.text)
                await self._run_batch(turn, reply)
            return PromptResult(stop="max_turns", turns=self._max_turns, text="")
        finally:
            self._prompting = False
            with trio.CancelScope(shield=True):
                await self._recorder.flush()

    async def _run_batch(self, turn: int, message: ModelMessage) -> None:
        calls = message.tool_calls
        ids = [f"{turn}.{index}" for index in range(len(calls))]
        repeated = {id_ for id_, n in Counter(c.id for c in calls).items() if n > 1}
        runner = self._runner
        gated: list[Gated] = []
        requested = 0
        try:
            for call_id, call in zip(ids, calls):
                request = self._request(call_id, call)
                self._recorder.record(request)
                requested += 1
                if self._refuse_unsafe(call_id, call, message, repeated) is not None:
                    continue
                allowed = await runner.guard(call_id, partial(runner.gate, request))
                if allowed is not None:
                    gated.append(allowed)
            if any(g.spec.execution_mode == "sequential" for g in gated):
                for g in gated:
                    await runner.guard(g.call_id, partial(runner.execute, g))
            else:
                async with trio.open_nursery() as nursery:
                    for g in gated:
                        nursery.start_soon(runner.guard, g.call_id, partial(runner.execute, g))
        except BaseException as exc:
            # close what the batch left open: allowed calls that never started, and the calls
            # the assistant asked for that were never requested because gating stopped
            reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                f"interrupted by {type(exc).__name__}")
            with trio.CancelScope(shield=True):
                for call_id in ids:
                    runner.close_open(call_id, reason)
                for call_id, call in list(zip(ids, calls))[requested:]:
                    self._recorder.record(self._request(call_id, call))
                    runner.close_open(call_id, reason)
                await self._recorder.flush()
            raise

    @staticmethod
    def _request(call_id: str, call: ModelToolCall) -> ToolCallRequested:
        return ToolCallRequested(call_id=call_id, name=call.name, arguments=call.arguments,
                                 origin="model", model_call_id=call.id)

    def _refuse_unsafe(
        self, call_id: str, call: ModelToolCall, message: ModelMessage, repeated: set[str]
    ) -> object | None:
        """End a call that must not run whatever the policy says; ``None`` if it may go on."""
        if message.stop_reason == "length":
            return self._runner.fail(
                call_id, "truncated",
                f"{call.name} was not run: the model's message was cut off (stop reason "
                f"'length'), so its arguments may be truncated",
            )
        if call.id in repeated:
            return self._runner.fail(
                call_id, "duplicate_call_id",
                f"{call.name} was not run: the model used the call id {call.id!r} twice in one "
                f"message, so its results could not be paired",
            )
        return None
