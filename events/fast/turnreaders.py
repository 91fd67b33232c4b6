"""The fast readers of a model turn's events: requested, responded, and the assistant
message it brings (see :mod:`events.fast.readers`, which picks them).

A model turn writes these every turn (docs/performance.md measured what they save). Pure: no
I/O.
"""

from __future__ import annotations

from typing import Any

from ..modelturns import Usage
from ..types import AssistantMessage, ModelRequested, ModelResponded, ModelToolCall, ProviderContent
from .fastinit import builder
from .readfields import FALLBACK, NESTED, exact_fields, strict_opt_int, strict_opt_str, strict_str

__all__ = [
    "ASSISTANT",
    "MODEL_REQUESTED",
    "MODEL_RESPONDED",
    "assistant",
    "model_requested",
    "model_responded",
]

# The builders of the classes made here (events.fast.fastinit): what calling the class makes, one
# call cheaper, for objects made on every line of a log.
_ModelToolCall = builder(ModelToolCall)
_AssistantMessage = builder(AssistantMessage)
_Usage = builder(Usage)
_ModelResponded = builder(ModelResponded)

_CALL = NESTED[ModelToolCall]
_CALL_BARE = _CALL - {"model_name"}


ASSISTANT = frozenset({"turn", "text", "tool_calls", "stop_reason", "provider_content"})
_ASSISTANT_BARE = ASSISTANT - {"provider_content"}
_PROVIDER = NESTED[ProviderContent]


def _provider_content(value: Any) -> ProviderContent | None:
    if value is None:
        return None
    exact_fields(value, _PROVIDER)
    return ProviderContent(api=strict_str(value["api"]), items=value["items"])


def assistant(data: Any) -> AssistantMessage:
    """A record's data as ``AssistantMessage``; :data:`FALLBACK` for any other shape."""
    # ``provider_content`` is written only when the message has some (and older logs lack it)
    if type(data) is not dict or (data.keys() != _ASSISTANT_BARE and data.keys() != ASSISTANT):
        raise FALLBACK
    turn, calls = data["turn"], data["tool_calls"]
    if type(turn) is not int or type(calls) is not list:
        raise FALLBACK
    tool_calls = []
    for call in calls:
        # ``model_name`` is written only when the adapter renamed the tool at the provider
        if type(call) is not dict or (call.keys() != _CALL_BARE and call.keys() != _CALL):
            raise FALLBACK
        tool_calls.append(_ModelToolCall(id=strict_str(call["id"]), name=strict_str(call["name"]),
                                         arguments=call["arguments"],
                                         model_name=strict_opt_str(call.get("model_name"))))
    return _AssistantMessage(turn=turn, text=strict_str(data["text"]), tool_calls=tuple(tool_calls),
                             stop_reason=strict_str(data["stop_reason"]),
                             provider_content=_provider_content(data.get("provider_content")))


MODEL_REQUESTED = frozenset({"turn", "provider", "model", "api", "settings", "stream"})


def model_requested(data: Any) -> ModelRequested:
    """A record's data as ``ModelRequested``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, MODEL_REQUESTED)
    turn, settings, stream = data["turn"], data["settings"], data["stream"]
    if type(turn) is not int or type(settings) is not dict or type(stream) is not bool:
        raise FALLBACK
    if settings and any(type(key) is not str for key in settings):
        raise FALLBACK
    return ModelRequested(turn=turn, provider=strict_str(data["provider"]),
                          model=strict_str(data["model"]),
                          api=strict_opt_str(data["api"]), settings=settings, stream=stream)


MODEL_RESPONDED = frozenset({"turn", "stop_reason", "model", "response_id", "usage"})
_USAGE = NESTED[Usage]


def _usage(data: Any) -> Usage | None:
    if data is None:
        return None
    exact_fields(data, _USAGE)
    return _Usage(input_tokens=strict_opt_int(data["input_tokens"]),
                  output_tokens=strict_opt_int(data["output_tokens"]),
                  cached_tokens=strict_opt_int(data["cached_tokens"]))


def model_responded(data: Any) -> ModelResponded:
    """A record's data as ``ModelResponded``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, MODEL_RESPONDED)
    turn = data["turn"]
    if type(turn) is not int:
        raise FALLBACK
    return _ModelResponded(turn=turn, stop_reason=strict_str(data["stop_reason"]),
                           model=strict_opt_str(data["model"]),
                           response_id=strict_opt_str(data["response_id"]),
                           usage=_usage(data["usage"]))
