"""What the hosts that advance a session in steps share (``engine.hosts.temporal``'s
activities, ``engine.hosts.dbos``'s workflow steps): each step opens the session on a shared
store, with a model made for it, does one thing, and closes it; every approval waits for a
person, who answers from outside (a signal, a durable message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from ..core.approvals import LATER, ApprovalRequest
from ..models import Model
from ..runtime.session import PromptResult, Session

__all__ = ["ModelFactory", "ask_later", "describe", "open_model", "stepped_session"]

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


@asynccontextmanager
async def stepped_session(open_store: Callable[[], Any], session_id: str, model: ModelFactory,
                          tools: Sequence[Any]) -> AsyncIterator[Session]:
    """The session ``session_id`` opened for one step on a store ``open_store`` makes (created
    if new), with its model made for the step and every approval left for a person; the
    session, its model and the store are closed when the step ends, however it ends."""
    store = open_store()
    try:
        async with AsyncExitStack() as stack, Session.open(
            store, session_id=session_id, create=True,
            model=await open_model(model, session_id, stack), tools=tools,
            approver=ask_later,
        ) as session:
            yield session
    finally:
        store.close()


def describe(result: PromptResult) -> dict[str, Any]:
    """How a step left the session, as plain data: ``stop``, ``text`` and the approvals it
    waits for (``call_id``, ``name``, ``arguments``, ``reason``)."""
    return {"stop": result.stop, "text": result.text, "pending": [
        {"call_id": p.call_id, "name": p.name, "arguments": p.arguments, "reason": p.reason}
        for p in result.pending]}
