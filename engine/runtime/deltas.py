"""Deltas: a streamed assistant message, piece by piece, for whoever is watching live.

A streaming model sends each piece of text and of tool-call arguments to
:meth:`Deltas.publish` as it arrives (through ``ModelRequest.on_delta``, the :class:`Deltas`
itself). Subscribers opened with :meth:`Deltas.subscribe` (``session.deltas()``) read them at
their own pace. Nothing here
is written to the log: the log gets the whole message, once, when the model returns it; a
stream cut off half-way leaves deltas that subscribers saw and no record of them. This is the
transient channel beside :meth:`engine.Session.follow`, which reads the log.

Publishing never waits: each subscriber has its own queue, so a slow one delays nobody.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from ..models.protocol import ModelDelta

__all__ = ["Deltas", "DeltaStream"]


class DeltaStream:
    """One subscriber's deltas, in order: ``async for delta in stream``. Iteration ends when
    the session closes."""

    def __init__(self) -> None:
        self._queue: deque[ModelDelta] = deque()
        self._wakeup = trio.Event()
        self._closed = False

    def _put(self, delta: ModelDelta) -> None:
        self._queue.append(delta)
        self._wakeup.set()

    def _close(self) -> None:
        self._closed = True
        self._wakeup.set()

    def __aiter__(self) -> DeltaStream:
        return self

    async def __anext__(self) -> ModelDelta:
        while not self._queue:
            if self._closed:
                raise StopAsyncIteration
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        return self._queue.popleft()


class Deltas:
    """The deltas of one session's model turns, handed to every open subscriber."""

    def __init__(self) -> None:
        self._streams: list[DeltaStream] = []
        self._closed = False

    def publish(self, delta: ModelDelta) -> None:
        """Hand ``delta`` to every subscriber (never waits)."""
        for stream in self._streams:
            stream._put(delta)

    #: a session's requests carry the session's :class:`Deltas` itself as their ``on_delta``:
    #: a bound method made a request would be one more object a request kept (a faux model
    #: keeps every request it gets) for CPython's collector to walk, and one kept here would
    #: make a reference cycle that only the collector frees
    __call__ = publish

    def close(self) -> None:
        """No more deltas: subscribers finish once they have read what they were sent."""
        self._closed = True
        for stream in self._streams:
            stream._close()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[DeltaStream]:
        """A subscriber that gets every delta published from now until the block ends."""
        stream = DeltaStream()
        if self._closed:
            stream._close()
        self._streams.append(stream)
        try:
            yield stream
        finally:
            self._streams.remove(stream)
