"""Host calls: a tool run for the host (``session.call_tool``), on a model call's path.

Step 1 (DESIGN's "one call, in order") is recorded here, in the host's task, under the id
``"h{n}"`` (:mod:`engine.core.callids`); steps 2-8 are :func:`engine.runtime.calls.advance`'s, as for any
call, carried in the host's task under a cancel scope that the session's closing cancels
(:class:`~engine.runtime.inflight.InFlight` keeps it). Nothing here touches the transcript: the
reducers leave host calls out of it. :class:`~engine.runtime.session.Session` exposes these as
``call_tool`` and ``resume_call``.
"""

from __future__ import annotations

from typing import Any

import trio

from events.types import ToolCallRequested

from ..core.callids import host_call_id
from ..core.environment import Environment
from ..core.errors import AlreadyRunning, CallNotFound, SessionClosed
from ..core.jsonvalues import own_result
from ..core.limits import clip_name
from ..core.questions import Asker
from ..core.toolcontext import CallOutcome
from .calls import advance
from .context import admitted, refuse_unreadable
from .inflight import InFlight
from .progress import ProgressListener
from .recorder import Recorder

__all__ = ["call_tool", "resume_call"]


async def call_tool(env: Environment, recorder: Recorder, inflight: InFlight, name: str,
                    arguments: Any, *, on_progress: ProgressListener | None = None,
                    asker: Asker | None = None) -> CallOutcome:
    """Record the host's request for ``name`` and carry it to its end (see
    ``Session.call_tool``); ``on_progress`` hears its updates meanwhile, and ``asker``, if
    given, answers its questions instead of the session's."""
    arguments, problem = admitted(arguments, env.limits)
    name = clip_name(str(name))
    call_id = host_call_id(recorder.projection.host_calls)
    recorder.record(ToolCallRequested(call_id=call_id, name=name, arguments=arguments,
                                      origin="host"))  # 1., before any checkpoint
    if problem is not None:
        result = refuse_unreadable(recorder, call_id, name, problem)
        await recorder.flush()
        return CallOutcome(call_id=call_id, result=own_result(result), status="failed")
    inflight.progress.listen(call_id, on_progress)
    if asker is not None:
        inflight.askers[call_id] = asker
    try:
        outcome = await _carry(env, recorder, inflight, call_id)
    finally:
        inflight.askers.pop(call_id, None)
        heard = inflight.progress.unlisten(call_id)
    if heard is not None:
        raise heard  # the host's listener failed: its own error, now that the call has ended
    return outcome


async def resume_call(env: Environment, recorder: Recorder, inflight: InFlight,
                      call_id: str) -> CallOutcome:
    """Carry a host call the log holds on from where it is (see ``Session.resume_call``)."""
    projection = recorder.projection
    view = projection.live_calls.get(call_id)
    if view is None or view.origin != "host":
        open_ones = [c for c in projection.open_calls
                     if projection.live_calls[c].origin == "host"]
        raise CallNotFound(f"{call_id!r} is not a host call of this session (open host "
                           f"calls: {', '.join(open_ones) or 'none'})")
    if inflight.hosting(call_id):
        raise AlreadyRunning(f"host call {call_id} is already running in this process: "
                             f"await the call_tool() or resume_call() that carries it")
    return await _carry(env, recorder, inflight, call_id)


async def _carry(env: Environment, recorder: Recorder, inflight: InFlight,
                 call_id: str) -> CallOutcome:
    """Steps 2-8 of a host call, in this task, under a scope the session's closing
    cancels, as a prompt's (``AgentLoop._loop_while_open``): the closing waits until the call
    has left it and written what it recorded, so that nothing of it is written after the
    session's last flush, also when its body ended just as the session began to close."""
    scope = trio.CancelScope()
    inflight.host(call_id, scope)
    ended: Any = None
    try:
        with scope:
            ended = await advance(env, recorder, inflight, call_id, wait=True)
        if scope.cancelled_caught:
            raise SessionClosed(f"the session closed while host call {call_id} was in flight: "
                                f"it stays open in the log; reopen the session and call "
                                f"resume_call({call_id!r}) to finish it")
        await recorder.flush()  # the end, written before the host has the result
    finally:
        try:
            # whatever happened, what the call recorded is written before the session's
            # closing goes on (it waits for this, then makes its last flush)
            await recorder.flush_finally()
        finally:
            inflight.unhost(call_id)
    return CallOutcome(call_id=call_id, result=own_result(ended),
                       status=recorder.projection.live_calls[call_id].status)
