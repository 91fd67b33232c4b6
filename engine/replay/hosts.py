"""The host's calls in a re-drive: asked for again where the log has them, beside the prompts.

A recorded host call (``session.call_tool``) is asked for again in a task of its own, in the
log's order, so each gets its recorded id (``"h0"``, …): the ones the log holds before a
message or a prompt when the driver replays that boundary's session changes, the ones asked
for while a batch ran once the replay has recorded that batch's message (:meth:`during`).
The tasks run in a nursery outside the session's block, so a host call the log leaves open
stays open (the session closes on it). A call the host cancelled then is cancelled where it
waited; an approval the host answered later is answered once the call waits, since no prompt
pauses for a host call.
"""

from __future__ import annotations

import trio

from events.types import ToolCallRequested

from ..runtime.session import Session
from .recorded import RecordedSession, RecordedTurn, Waiter
from .watch import Watch

__all__ = ["ReplayedHosts"]


class ReplayedHosts:
    """The host calls of one re-drive (see the module docstring)."""

    def __init__(self, book: RecordedSession, watch: Watch) -> None:
        self.book = book
        self.watch = watch
        self.session: Session | None = None
        self.nursery: trio.Nursery | None = None
        #: the recorded host calls asked for again, in order
        self.asked: list[str] = []
        #: the batches whose host calls are being asked for again: (turn, done)
        self._issuing: list[tuple[int, trio.Event]] = []

    def attach(self, session: Session, nursery: trio.Nursery) -> None:
        """Ask in ``session``, from tasks of ``nursery`` (outside the session's block)."""
        self.session, self.nursery = session, nursery
        self.watch.holds = session.state.live_calls.__contains__

    async def caught_up(self) -> None:
        """Wait until the host calls of the batches the replay has begun are asked for: a
        later one must come after them, to get its recorded id."""
        assert self.session is not None
        for turn, issued in self._issuing:
            if self.session.state.turn >= turn:
                await issued.wait()

    async def ask(self, request: ToolCallRequested) -> None:
        """Ask for ``request`` again; returns once it is recorded."""
        assert self.nursery is not None
        await self.nursery.start(self._call, request)

    def during(self, turn: RecordedTurn) -> None:
        """Ask for the host calls of ``turn``'s batch once the replay has its message."""
        if not turn.during:
            return
        assert self.nursery is not None
        issued = trio.Event()
        self._issuing.append((turn.message.turn, issued))
        self.nursery.start_soon(self._during, turn, issued)

    def answer_later(self, call_id: str) -> None:
        """The recorded approver said "later" about a host call (or one under it): answer it
        as the host did, in a task that runs once the call waits."""
        assert self.nursery is not None
        self.nursery.start_soon(self._resolve, call_id)

    def ended(self) -> list[str]:
        """The host calls asked for again that the log ended."""
        return [c for c in self.asked if self.book.calls[c].terminal is not None]

    async def _call(self, request: ToolCallRequested,
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """``started`` comes before ``call_tool`` records the request (it does so before its
        first checkpoint), so the host calls are named in the order they are asked for."""
        session = self.session
        assert session is not None
        call = self.book.calls.get(request.call_id)
        waiter = self.book.chain_waiter(request.call_id) if call is not None else None
        self.asked.append(request.call_id)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                if waiter is not None and waiter.cause == "host":
                    nursery.start_soon(self._cancel_when_reached, waiter, scope)
                task_status.started()
                try:
                    await session.call_tool(request.name, request.arguments)
                except RuntimeError:
                    if call is None or call.terminal is not None:
                        raise  # the log ended it, so the replay must have too
                nursery.cancel_scope.cancel()

    async def _during(self, turn: RecordedTurn, issued: trio.Event) -> None:
        session = self.session
        assert session is not None
        number = turn.message.turn
        await self.watch.until(lambda: session.state.turn >= number or self.watch.finished)
        if session.state.turn >= number:  # never, if the replay ends first
            for request in turn.during:
                await self.ask(request)
        issued.set()

    async def _cancel_when_reached(self, waiter: Waiter, scope: trio.CancelScope) -> None:
        await self.watch.until(lambda: self.watch.reached(waiter))
        scope.cancel()

    async def _resolve(self, call_id: str) -> None:
        session = self.session
        answer = self.book.calls[call_id].answer
        assert session is not None and answer is not None
        await session.resolve_approval(call_id, answer.granted, answer.scope,
                                       reason=answer.reason,
                                       arguments=answer.arguments if answer.granted else None)
