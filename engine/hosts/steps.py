"""What the hosts that advance a session in steps share (``engine.hosts.temporal``'s
activities, ``engine.hosts.dbos``'s workflow steps): each step opens the session on a shared
store, with a model made for it, does one thing, and closes it; every approval waits for a
person, who answers from outside (a signal, a durable message).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

from ..core.approvals import LATER, ApprovalRequest
from ..models import Model
from ..runtime.session import PromptResult

__all__ = ["ModelFactory", "ask_later", "describe", "open_model"]

#: What makes a session's model for one step, from the session's id: the model itself, or an
#: async context manager that opens it (and its client) and closes it when the step ends.
ModelFactory = Callable[[str], "Model | AbstractAsyncContextManager[Model]"]


async def ask_later(request: ApprovalRequest) -> Any:
    """Every approval waits for a person (a signal, a durable message): the prompt pauses."""
    return LATER


async def open_model(factory: ModelFactory, session_id: str, stack: AsyncExitStack) -> Model:
    """The session's model, its context entered on ``stack`` if the factory gave one."""
    made = factory(session_id)
    if isinstance(made, AbstractAsyncContextManager):
        return await stack.enter_async_context(made)
    return made


def describe(result: PromptResult) -> dict[str, Any]:
    """How a step left the session, as plain data: ``stop``, ``text`` and the approvals it
    waits for (``call_id``, ``name``, ``arguments``, ``reason``)."""
    return {"stop": result.stop, "text": result.text, "pending": [
        {"call_id": p.call_id, "name": p.name, "arguments": p.arguments, "reason": p.reason}
        for p in result.pending]}
