"""Watching a replay as it runs, so that its stand-ins can wait for the right moment.

A :class:`Watch` follows the replayed session's records and knows, for every call, how far it
has got. The stand-ins wait on it:

- before a nested call's policy decision or "for the session" answer, for the steps of other
  top-level calls that the log holds before it (:attr:`~engine.replay.recorded.RecordedSession.
  decision_deps`): concurrent calls then see each other's session grants as they did;
- a stand-in that waits where the recorded session was stopped from outside marks itself
  :meth:`waiting`; the driver stops the prompt once every such place of the batch is reached
  (or can no longer be).

Every wait ends: a step waited for counts as done once its call, or an ancestor, has ended.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from events.types import (
    TERMINAL_EVENTS,
    ApprovalResolved,
    PolicyDecided,
    Record,
    ToolCallRequested,
    ToolExecutionStarted,
)

from ..core.callids import from_host
from .recorded import RecordedSession, Waiter, turn_of

__all__ = ["Watch"]


class Watch:
    """How far each call of the replay has got; wakes whoever waits for a change."""

    def __init__(self, book: RecordedSession, concurrent: Callable[[int], bool]) -> None:
        self.book = book
        #: whether the batch of a turn runs its calls at once in the replay (if it runs them
        #: one after another, the recorded order between them cannot be waited for)
        self.concurrent = concurrent
        self.decisions: dict[str, str] = {}
        self.resolved: set[str] = set()
        self.started: set[str] = set()
        self.closed: set[str] = set()
        self.waiting: set[str] = set()
        self.requested: set[str] = set()
        #: whether the replayed session holds a call now (the driver sets it once the session
        #: is open: the followed records may lag behind)
        self.holds: Callable[[str], bool] = self.requested.__contains__
        #: the replay has run every prompt: a step still waited for will never come
        self.finished = False
        self._change = trio.Event()

    # -- feeding ----------------------------------------------------------------------------

    def see(self, record: Record) -> None:
        """Take in one replayed record."""
        event = record.event
        call_id = getattr(event, "call_id", None)
        if call_id is None:
            self.poke()  # an assistant message: host calls may wait for it
            return
        if isinstance(event, ToolCallRequested):
            self.requested.add(call_id)
        elif isinstance(event, PolicyDecided):
            self.decisions[call_id] = event.decision
        elif isinstance(event, ApprovalResolved):
            self.resolved.add(call_id)
        elif isinstance(event, ToolExecutionStarted):
            self.started.add(call_id)
        elif isinstance(event, TERMINAL_EVENTS):
            self.closed.add(call_id)
        self.poke()

    def mark_waiting(self, call_id: str) -> None:
        """A stand-in now waits where the recorded call was stopped."""
        self.waiting.add(call_id)
        self.poke()

    def poke(self) -> None:
        """Wake every waiter to look again."""
        self._change.set()
        self._change = trio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds (checked after every change)."""
        while not condition():
            await self._change.wait()

    # -- what the waits ask -------------------------------------------------------------------

    def finish(self) -> None:
        """Every prompt has run: what is still waited for will never come (a host call that
        waits for a step of a call the replay did not make ends its wait)."""
        self.finished = True
        self.poke()

    def gone(self, call_id: str) -> bool:
        """The call has ended, or an ancestor has (so it will never come, or never go on), or
        the replay has finished its prompts without it."""
        if self.finished and call_id not in self.requested:
            return True
        parts = call_id.split("/")
        return any("/".join(parts[:n]) in self.closed for n in range(1, len(parts) + 1))

    def decided(self, call_id: str) -> bool:
        """The call's policy decision is in the replay, or will never be."""
        return call_id in self.decisions or self.gone(call_id)

    def answered(self, call_id: str) -> bool:
        """The call's approval is resolved in the replay, or will never be."""
        return (call_id in self.resolved or self.decisions.get(call_id, "ask") != "ask"
                or self.gone(call_id))

    def before_decision(self, call_id: str) -> bool:
        """Every session-wide answer the log holds before this call's decision is given."""
        deps = self.book.decision_deps.get(call_id, ())
        return all(self.answered(dep) for dep in deps if self._waits_for(call_id, dep))

    def before_grant(self, call_id: str) -> bool:
        """Every step the log holds before this call's session-wide answer is done."""
        deps = self.book.grant_deps.get(call_id, ())
        return all(self.answered(dep) if kind == "grant" else self.decided(dep)
                   for dep, kind in deps if self._waits_for(call_id, dep))

    def _waits_for(self, call_id: str, dep: str) -> bool:
        """Whether ``call_id`` can wait for a step of ``dep`` without waiting for itself: a
        call of a batch that runs one call after another cannot wait for a sibling's, and
        a call waits for a host call only if the replay asks for it by the time that call's
        batch runs, or with that host call (one asked for later would never come)."""
        if from_host(dep):
            root = dep.split("/", 1)[0]
            asked_by = self.book.host_turns.get(call_id.split("/", 1)[0], 0) if from_host(
                call_id) else turn_of(call_id)
            return self.holds(root) or self.book.host_turns.get(root, 1 << 30) <= asked_by
        return from_host(call_id) or self.concurrent(turn_of(call_id))

    def reached(self, waiter: Waiter) -> bool:
        """The replay waits where the recorded call was stopped, or never will."""
        call_id = waiter.call_id
        if call_id in self.waiting or self.gone(call_id):
            return True
        return waiter.kind == "approval" and self.decisions.get(call_id, "ask") != "ask"

    def stop_due(self, waiters: tuple[Waiter, ...], ended: tuple[str, ...]) -> bool:
        """Whether the host's stop can come now: the calls that ended before it have ended,
        every waiter of the batch is reached, and at least one of them really waits."""
        return (bool(waiters) and all(self.gone(c) for c in ended)
                and all(self.reached(w) for w in waiters)
                and any(w.call_id in self.waiting and not self.gone(w.call_id)
                        for w in waiters))
