"""The body of a typed tool: what the engine runs as ``execute(call, ctx)``.

It structures the call's arguments into the parameters' types, calls the function, and makes
its result (:class:`~.signatures.ToolSignature`). An async function is awaited where the body
runs; a sync one is handed to ``ctx.run_in_thread``, which the runtime implements with a
worker thread that a timeout or a cancellation stops waiting for at once (docs/tools.md,
"Sync tools"). So the runtime's path for a call is the same for every tool, and the core
imports no thread or event loop. Pure.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

from events.results import ToolResult

from ..toolcontext import ToolContext
from .signatures import ToolSignature

__all__ = ["TypedBody"]


class _Call(Protocol):
    """What the body reads of a :class:`~engine.core.tools.ToolCall`."""

    @property
    def arguments(self) -> Any: ...


class TypedBody:
    """``execute(call, ctx)`` for a typed function (its :class:`ToolSignature`)."""

    __slots__ = ("__name__", "__qualname__", "signature")

    def __init__(self, signature: ToolSignature) -> None:
        self.signature = signature
        function = signature.function
        self.__name__ = getattr(function, "__name__", "tool")
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)

    async def __call__(self, call: _Call, ctx: ToolContext) -> ToolResult:
        """Run the function on ``call``'s arguments (structured) and make its result."""
        signature = self.signature
        args, kwargs = signature.bind(call.arguments, ctx)
        if signature.blocking:
            returned = await ctx.run_in_thread(functools.partial(signature.function, *args,
                                                                 **kwargs))
        else:
            returned = await signature.function(*args, **kwargs)
        return signature.result(returned)

    def __repr__(self) -> str:
        return f"<the body of the typed tool {self.__qualname__}>"
