"""Which calls of this process are in flight: the one owner of the runtime's bookkeeping.

The log says what happened to every call; it cannot say what this process is doing about it
now. :class:`InFlight` holds that, and is the only code that changes it:

- the top-level calls handed to a task of the session's nursery, each with the cancel scope
  that stops it, or run in the caller's task (a batch never starts a call twice, and
  cancelling a batch cancels them);
- the scope of the prompt (or resume) running now, in whatever task the host called it from:
  closing the session stops it, as it stops the host's calls;
- which of them, and which nested calls, are being carried forward right now;
- the calls parked until the host answers their approval (a ``trio.Event`` each), and the calls
  whose approver is deciding now (not pending for the host yet); likewise the questions a
  body waits on (parked under the question's id, counted for its call) and those whose asker
  is deciding now;
- the host's calls (``session.call_tool``) running in the host's tasks, each with the cancel
  scope that stops it when the session closes (which waits for them to leave it); a batch
  never waits for them, nor they for it;
- who hears the progress of which call (:class:`~engine.runtime.progress.ProgressRoutes`);
- whether the session is suspending (closing: nothing more is recorded about its calls, and
  every change the host asks for is refused) and whether a call failed with a
  ``BaseException`` that stops the session.

Every change wakes whoever waits in :meth:`InFlight.settled` (the prompt's task, waiting for
its batch), which then asks :meth:`InFlight.quiet`: can any call of this process still move on
its own? A batch is settled when none can.
"""

from __future__ import annotations

from typing import Any

import trio

from ..core.callids import from_host
from .progress import ProgressRoutes

__all__ = ["InFlight"]


class InFlight:
    """The calls of one session that this process runs or parks (see the module's docstring)."""

    def __init__(self) -> None:
        #: top-level calls handed to a task, with the scope that cancels them (``None``: the
        #: prompt's own task, which the prompt's scope stops)
        self._owned: dict[str, trio.CancelScope | None] = {}
        self._prompt: trio.CancelScope | None = None  # the running prompt's, in its task
        self._active: dict[str, None] = {}  # calls whose step a task is carrying now
        self._parked: dict[str, trio.Event] = {}  # waiting for the host's answer
        self._questioned: dict[str, int] = {}  # calls whose body waits on parked questions
        self._asked_by: dict[str, str] = {}  # the parked questions' calls, by question id
        self._asking: dict[str, None] = {}  # their approver is deciding now
        self._hosted: dict[str, trio.CancelScope] = {}  # the host's calls, in the host's tasks
        self._change: trio.Event | None = None  # made when someone waits for a change
        #: the session's progress handlers, and the callers listening to their calls' updates
        self.progress = ProgressRoutes()
        #: the askers host calls brought (``call_tool(..., asker=...)``), by the host call's
        #: id: they answer the questions of that call and of its nested calls
        self.askers: dict[str, Any] = {}
        self.suspending = False
        self.escaped = False

    # -- what the session asks ----------------------------------------------------------------

    def owned(self, call_id: str) -> bool:
        """Whether a task of this process carries the top-level call ``call_id``."""
        return call_id in self._owned

    def asking(self, call_id: str) -> bool:
        """Whether the approver of ``call_id`` is deciding now (it is not pending for the host)."""
        return call_id in self._asking

    # -- the changes, each in one place -------------------------------------------------------

    def hand_over(self, call_ids: list[str], scope: trio.CancelScope | None) -> None:
        """``call_ids`` are carried by one task under ``scope`` from now (one after another,
        if more than one): no batch starts them again, and the first counts as moving at once,
        before the task first runs."""
        for call_id in call_ids:
            self._owned[call_id] = scope
        self._active[call_ids[0]] = None

    def begin(self, call_id: str) -> None:
        """A task carries ``call_id`` forward from now (its body may run)."""
        self._active[call_id] = None

    def end(self, call_id: str) -> None:
        """The task is done with ``call_id``, whatever happened to it."""
        self._active.pop(call_id, None)
        self._owned.pop(call_id, None)
        self.changed()

    def release(self, call_ids: list[str]) -> None:
        """The task that carried ``call_ids`` has ended (some may never have begun)."""
        for call_id in call_ids:
            self._active.pop(call_id, None)
            self._owned.pop(call_id, None)
        self.changed()

    def host(self, call_id: str, scope: trio.CancelScope) -> None:
        """The host's call ``call_id`` runs in the host's task under ``scope`` until
        :meth:`unhost`: closing the session cancels it (:meth:`suspend`)."""
        self._hosted[call_id] = scope

    def unhost(self, call_id: str) -> None:
        """The host's call ``call_id`` has returned, whatever happened to it, and written
        what it recorded."""
        self._hosted.pop(call_id, None)
        self.changed()

    def hosting(self, call_id: str) -> bool:
        """Whether a task of the host is carrying the host call ``call_id`` now."""
        return call_id in self._hosted

    def prompting(self, scope: trio.CancelScope | None) -> None:
        """A prompt or resume runs under ``scope`` from now (``None``: it has left it)."""
        self._prompt = scope
        if scope is None:
            self.changed()

    def ask(self, call_id: str) -> None:
        """The approver of ``call_id`` (or the asker of the question of that id) decides
        from now."""
        self._asking[call_id] = None

    def asked(self, call_id: str) -> None:
        """The approver of ``call_id`` has answered (or failed)."""
        del self._asking[call_id]
        self.changed()

    async def park(self, call_id: str, *, question: str | None = None) -> None:
        """Wait here until the host answers ``call_id``'s approval (:meth:`unpark`), or, with
        ``question``, that question of its body's (``unpark(question)``): the call counts as
        waiting meanwhile."""
        key = call_id if question is None else question
        waiter = trio.Event()
        self._parked[key] = waiter
        if question is not None:
            self._asked_by[question] = call_id
            self._questioned[call_id] = self._questioned.get(call_id, 0) + 1
        self.changed()
        try:
            await waiter.wait()
        finally:
            if self._parked.get(key) is waiter:  # cancelled, not answered
                self.unpark(key)

    def unpark(self, call_id: str) -> None:
        """The host answered ``call_id`` (or the question of that id): its task goes on. It
        counts as moving at once, not when its task next runs, so whoever waits for the batch
        to settle never sees it as still waiting in between."""
        waiter = self._parked.pop(call_id, None)
        asker = self._asked_by.pop(call_id, None)
        if asker is not None:  # a question: its call moves again once none waits
            left = self._questioned.pop(asker) - 1
            if left:
                self._questioned[asker] = left
        self.changed()
        if waiter is not None:
            waiter.set()

    def stop(self) -> None:
        """Cancel every call handed to a task (they all belong to the current batch)."""
        for scope in self._owned.values():
            if scope is not None:
                scope.cancel()

    async def suspend(self) -> None:
        """The session closes with calls in flight: stop them, and record nothing about it
        (the log reads as if the process had stopped here). A prompt still running and the
        host's calls (in tasks outside the session's block) are stopped too, and this returns
        once they have left their scopes, written what they recorded, and every call handed
        to a task has left it, whatever cancels the closing: what they recorded is in the log
        before the session's last flush, and nothing after it (the session's nursery waits
        for its own tasks; nothing would wait for the host's). From here on the session
        refuses every change (``Session._check_open``)."""
        self.suspending = True
        self.changed()  # whoever waits for a change learns the session is closing
        self.stop()
        for scope in self._hosted.values():
            scope.cancel()
        if self._prompt is not None:
            self._prompt.cancel()
        if self._owned or self._prompt is not None or self._hosted:
            with trio.CancelScope(shield=True):
                while self._owned or self._prompt is not None or self._hosted:
                    await self.next_change()

    def escape(self) -> None:
        """A call failed with a ``BaseException`` that stops the session."""
        self.escaped = True
        self.changed()

    # -- waiting for a change -----------------------------------------------------------------

    def changed(self) -> None:
        """Wake whoever waits in :meth:`settled` or :meth:`next_change`."""
        if self._change is not None:
            self._change.set()
            self._change = None

    async def stopped(self) -> None:
        """Wait until no top-level call is handed to a task (after :meth:`stop`)."""
        while self._owned:
            await self.next_change()

    async def next_change(self) -> None:
        """Wait for the next change of which calls run or wait."""
        if self._change is None:
            self._change = trio.Event()
        await self._change.wait()

    def quiet(self) -> bool:
        """Whether no call of this process can make progress on its own: every call being
        carried waits for the host's answer, or for a nested call of its own that does. The
        host's calls do not count: their own callers wait for them."""
        if not self._parked and not self._hosted:
            return not self._active
        for call_id in self._active:
            if from_host(call_id):
                continue  # the host's: its caller waits for it
            if call_id in self._parked or call_id in self._questioned:
                continue  # waits for an answer
            below = call_id + "/"
            if any(other.startswith(below) for other in self._active):
                continue  # waits for a nested call of its own
            return False  # runs, or its approver is still deciding
        return True

    async def settled(self) -> None:
        """Return once no call of this process can make progress on its own (a tool body
        that waits for a nested call while it also works in a task of its own counts as
        waiting)."""
        while not self.quiet():
            await self.next_change()
