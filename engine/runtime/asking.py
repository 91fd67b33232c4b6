"""Asking the model for one assistant message, with the model's side on the record.

:func:`ask_model` is the one place the session calls a model. Before the call it records
:class:`~events.modelturns.ModelRequested` (who is asked, with which settings) and flushes it, so
the log is ahead of the request like it is ahead of every tool body; after it,
:class:`~events.modelturns.ModelResponded` (the answer's model, response id, stop reason, usage),
which the assistant message follows at once. If the model raises, or the caller is cancelled
while it streams, :class:`~events.modelturns.ModelFailed` is recorded instead and the exception
goes on: the log never holds half a message, and the next ``resume()`` asks again. The turn's
latency is the difference between the two records' times (the session's clock).
"""

from __future__ import annotations

from contextlib import suppress

import attrs

from events.modelturns import ModelFailed, ModelRequested, ModelResponded, ProviderContent

from ..core.jsonvalues import own_json
from ..core.limits import MAX_NAME, Limits, clip_name, json_size
from ..core.outputs import error_info
from ..models import Model, ModelError, ModelMessage, ModelRequest, model_info
from .deltas import Deltas
from .recorder import Recorder, SessionBroken

__all__ = ["ask_model", "kept_content", "model_failed"]


async def ask_model(model: Model, recorder: Recorder, deltas: Deltas) -> ModelMessage:
    """The model's next assistant message, asked for and answered on the record."""
    state = recorder.projection
    turn = state.turn + 1
    info = model_info(model)
    recorder.record(ModelRequested(
        turn=turn, provider=info.provider, model=info.model, api=info.api,
        settings=own_json(dict(info.settings)), stream=info.stream))
    request = ModelRequest(transcript=state.transcript, tools=state.declared_tools,
                           system=state.system_prompt, turn=turn, on_delta=deltas)
    try:
        # what the model is about to read is in the log; a cancellation that lands here ends
        # the turn before it was sent, recorded as such
        await recorder.flush()
        reply = await model.complete(request)
        if not isinstance(reply, ModelMessage):
            raise TypeError(f"the model returned {reply!r}, not a ModelMessage")
    except BaseException as exc:
        with suppress(SessionBroken):  # a log that cannot be written says so on its own
            recorder.record(model_failed(turn, exc))
        raise
    reply = _clipped(reply)
    recorder.record(ModelResponded(
        turn=turn, stop_reason=reply.stop_reason, model=reply.model,
        response_id=reply.response_id, usage=reply.usage))
    return reply


def _clipped(reply: ModelMessage) -> ModelMessage:
    """``reply`` with the provider's names for the exchange (stop reason, model, response id)
    cut to :data:`~engine.core.limits.MAX_NAME` characters, as a call's name and id are: they go on
    the record, and a provider may send anything."""
    said = (reply.stop_reason, reply.model or "", reply.response_id or "")
    if all(len(name) <= MAX_NAME for name in said):
        return reply
    return attrs.evolve(reply, stop_reason=clip_name(reply.stop_reason),
                        model=_clip(reply.model), response_id=_clip(reply.response_id))


def _clip(name: str | None) -> str | None:
    return None if name is None else clip_name(name)


def model_failed(turn: int, exc: BaseException) -> ModelFailed:
    """The record of a model turn that ended in ``exc``: a :class:`ModelError` says its kind;
    a cancellation (or an interrupt) is ``cancelled``; anything else ``error``."""
    error = error_info(exc)
    if isinstance(exc, ModelError):
        return ModelFailed(turn=turn, kind=exc.kind, error=error, status=exc.status,
                           request_id=_clip(exc.request_id), response_id=_clip(exc.response_id))
    interrupted = not isinstance(exc, Exception)
    return ModelFailed(turn=turn, kind="cancelled" if interrupted else "error", error=error)


def kept_content(reply: ModelMessage, limits: Limits) -> ProviderContent | None:
    """The provider's own content of a message, if it is JSON within the session's result
    size limit; else none is kept, and the adapter rebuilds the message from its text and
    calls."""
    content = reply.provider_content
    if content is None:
        return None
    try:
        items = own_json(content.items)
    except ValueError:
        return None
    if json_size(items) > limits.max_result_bytes:
        return None
    return ProviderContent(api=content.api, items=items)
