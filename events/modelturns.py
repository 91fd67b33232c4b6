"""The model's side of a session, as facts: its system prompt, and each model turn.

A model turn is asked for (:class:`ModelRequested`, written before the model is called, like
every other side effect) and then answered (:class:`ModelResponded`, recorded just before the
assistant message it produced) or not (:class:`ModelFailed`: the provider's error, a timeout,
a refusal, a cancelled request). The assistant message itself stays
:class:`~events.types.AssistantMessage`: these records say how it was obtained, not what it
says. How long a turn took is the difference between the two records' times (the session's
injected clock), so it needs no field of its own.

The field names follow what OpenTelemetry's GenAI conventions ask of a ``chat`` span:
``provider`` (``gen_ai.provider.name``), ``model`` (``gen_ai.request.model`` on the request,
``gen_ai.response.model`` on the answer), ``response_id`` (``gen_ai.response.id``),
``stop_reason`` (``gen_ai.response.finish_reasons``), ``usage`` (``gen_ai.usage.*``).

Pure values, like every event: no I/O, no clock. The answer's records, made on every turn,
are built by :func:`~events.fast.fastinit.fast_init`, as a call's are.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .fast.fastinit import fast_init
from .results import ErrorInfo

__all__ = [
    "ModelFailed",
    "ModelFailureKind",
    "ModelRequested",
    "ModelResponded",
    "ProviderContent",
    "SystemPromptSet",
    "Usage",
]

#: Why a model turn failed. ``rate_limited``: HTTP 429 after the client's retries;
#: ``server_error``: 5xx after them; ``timeout``: no answer in time; ``connection``: the
#: provider could not be reached; ``refused``: the model declined to answer (a refusal);
#: ``bad_request``: another 4xx (a wrong key, an unknown model, a malformed request);
#: ``cancelled``: the caller cancelled the turn (or the process was interrupted) before the
#: answer came; ``error``: anything else the model raised.
ModelFailureKind = Literal[
    "rate_limited", "server_error", "timeout", "connection", "refused", "bad_request",
    "cancelled", "error",
]


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class Usage:
    """Tokens one model turn used, as the provider counted them.

    ``input_tokens`` counts every input token, those read from the provider's prompt cache
    included (``cached_tokens`` says how many of them were); ``output_tokens`` every token
    generated, reasoning included. ``None``: the provider did not say.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


@attrs.frozen(kw_only=True)
class ProviderContent:
    """An assistant message as its provider gave it, kept when it holds blocks toolledger does
    not interpret (reasoning, thinking, citations), so that the adapter that made it can send
    it back unchanged on the next turn. ``api`` names the format (``"openai.chat"``,
    ``"openai.responses"``, ``"anthropic.messages"``); ``items`` is the message's content (a
    JSON list of blocks or output items) in that format."""

    api: str
    items: Any


@attrs.frozen(kw_only=True)
class SystemPromptSet:
    """The session's system prompt (instructions) from this point on; ``None`` clears it."""

    text: str | None


@attrs.frozen(kw_only=True)
class ModelRequested:
    """The session asked the model for the assistant message of ``turn``.

    ``provider`` and ``model`` name who was asked (``"openai"``, ``"gpt-4.1"``); ``api`` the
    provider's interface (``"chat"``, ``"responses"``, ``"messages"``), if it has several;
    ``settings`` the request's parameters beside the transcript (temperature, token limit,
    ...), as the adapter sent them; ``stream``: whether the answer was streamed.
    """

    turn: int
    provider: str
    model: str
    api: str | None = None
    settings: dict[str, Any] = attrs.field(factory=dict)
    stream: bool = False


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ModelResponded:
    """The model answered the request of ``turn``: the assistant message that follows.

    ``model`` is the model that answered, as the provider named it (it may be more precise
    than the one asked for); ``stop_reason`` the provider's own word
    (:func:`engine.models.truncated` reads it); ``usage`` the tokens it cost.
    """

    turn: int
    stop_reason: str
    model: str | None = None
    response_id: str | None = None
    usage: Usage | None = None


@attrs.frozen(kw_only=True)
class ModelFailed:
    """The request of ``turn`` got no assistant message: ``kind`` says why
    (:data:`ModelFailureKind`), ``error`` the exception as raised (the provider's message
    included), ``status`` the HTTP status, ``response_id`` / ``request_id`` what the provider
    named the exchange, where it said."""

    turn: int
    kind: ModelFailureKind
    error: ErrorInfo
    status: int | None = None
    request_id: str | None = None
    response_id: str | None = None
