"""The names OpenTelemetry's GenAI semantic conventions give what a session records.

Written out here, not imported from ``opentelemetry-semantic-conventions``: the GenAI
conventions are still "Development", and that package marks its incubating names deprecated
as they move to their own repository. Followed: the GenAI conventions as published with
OpenTelemetry semantic conventions v1.41 (:data:`SEMCONV_VERSION`). :mod:`engine.hosts.otel` makes
the spans; this module only says what their attributes are called, and how a model turn's
settings and usage read as attributes. Pure: no OpenTelemetry import, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.modelturns import Usage

#: The version of the OpenTelemetry semantic conventions whose GenAI spans these follow.
SEMCONV_VERSION = "1.41.0"
#: The instrumentation scope the spans are made under.
SCOPE = "toolledger"

OPERATION_NAME = "gen_ai.operation.name"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
PROVIDER_NAME = "gen_ai.provider.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
#: toolledger's own id of a call (``"1.0"``), beside ``gen_ai.tool.call.id``, which holds the
#: provider's id of the call when the model made it (``"call_0"``), so tool spans match the
#: model's calls: the engine's id names nested and host calls too, and every record of the log
CALL_ID = "toolledger.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"

#: A model's settings (as its adapter sends them) that have a ``gen_ai.request.*`` attribute:
#: the providers' names for the same parameter map to the one attribute.
REQUEST_SETTINGS: Mapping[str, str] = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",
}


def request_attributes(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.request.*`` attributes of a model turn's recorded settings: those
    :data:`REQUEST_SETTINGS` names, with a value an attribute can hold (a number, or strings:
    one stop sequence is a list of one); the others are left out."""
    attributes: dict[str, Any] = {}
    for setting, value in settings.items():
        name = REQUEST_SETTINGS.get(setting)
        if name is not None and (value := _attribute(value)) is not None:
            attributes[name] = value
    return attributes


def _attribute(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The ``gen_ai.usage.*`` attributes of a turn's usage, the counts the provider gave.
    ``input_tokens`` counts cached tokens too, as the conventions ask; how many were read
    from the cache is ``gen_ai.usage.cache_read.input_tokens``."""
    counts = ((USAGE_INPUT_TOKENS, usage.input_tokens),
              (USAGE_OUTPUT_TOKENS, usage.output_tokens),
              (USAGE_CACHE_READ_INPUT_TOKENS, usage.cached_tokens))
    return {name: tokens for name, tokens in counts if tokens is not None}
