"""The model protocol: what the session hands a model, and what it takes back.

A model is anything with ``async def complete(request) -> ModelMessage``. The request holds
the transcript (a read-only view, shared with the session: no copy per turn), the tools
declared to the model, the session's system prompt, the turn being asked for, and a callback
for streamed deltas. The answer is one whole assistant message. That is all an adapter has to
implement; docs/models.md shows one written from scratch.

Around each call the session records the model's side (:mod:`events.modelturns`): who was asked
and with what settings (:attr:`ModelInfo`, read from the model's ``info`` attribute if it has
one), then the answer's usage, response id and stop reason, or the failure. A provider's
failure reaches the host as one exception type, :class:`ModelError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

import attrs

from events.errors import ToolledgerError
from events.fast.fastinit import fast_init
from events.modelturns import ModelFailureKind, ProviderContent, Usage
from events.types import ModelToolCall, ToolSnapshot

from ..core.reducers import TranscriptView

__all__ = [
    "TRUNCATED_STOP_REASONS",
    "Model",
    "ModelDelta",
    "ModelError",
    "ModelInfo",
    "ModelMessage",
    "ModelRequest",
    "model_info",
    "truncated",
]

#: The stop reasons that mean "cut off at the token limit", under every provider's name:
#: OpenAI Chat Completions' ``length``, Anthropic Messages' ``max_tokens`` (and
#: ``model_context_window_exceeded``), OpenAI Responses' ``incomplete`` status, and
#: ``max_output_tokens``, the reason that status gives. Compared case-insensitively (Gemini
#: says ``MAX_TOKENS``).
TRUNCATED_STOP_REASONS = frozenset({
    "length", "max_tokens", "max_output_tokens", "model_context_window_exceeded", "incomplete",
})


def truncated(stop_reason: str) -> bool:
    """Whether a message that stopped for ``stop_reason`` was cut off by a token limit, so its
    tool calls' arguments may be incomplete. The one place stop reasons are read: an adapter
    passes the provider's word on as it is (it is recorded as given), and the engine asks
    this. Pure::

        >>> truncated("max_tokens"), truncated("length"), truncated("end_turn")
        (True, True, False)
    """
    return stop_reason.strip().lower() in TRUNCATED_STOP_REASONS


_str = attrs.validators.instance_of(str)
_int = attrs.validators.instance_of(int)
_optional_str = attrs.validators.optional(_str)


@attrs.frozen(kw_only=True)
class ModelDelta:
    """A piece of an assistant message while it streams: for live subscribers only
    (``session.deltas()``), never written to the log; the whole message is recorded once.

    ``kind`` is ``"text"`` (a piece of the message's text) or ``"arguments"`` (a piece of the
    JSON arguments of the tool call at ``index``, in the message's order of calls, whose
    model id and tool name are ``call_id`` and ``name`` when the provider has said them).
    Each field is checked: a piece a provider sent malformed fails the turn (the adapter
    turns the ``TypeError`` into a :class:`ModelError`) instead of reaching a subscriber.
    """

    turn: int
    kind: Literal["text", "arguments"] = attrs.field(
        validator=attrs.validators.in_(("text", "arguments")))
    text: str = attrs.field(validator=_str)
    index: int = attrs.field(default=0, validator=_int)
    call_id: str | None = attrs.field(default=None, validator=_optional_str)
    name: str | None = attrs.field(default=None, validator=_optional_str)


def _ignore(delta: ModelDelta) -> None:
    pass


@fast_init
@attrs.frozen(kw_only=True)
class ModelRequest:
    """What a model is given: the transcript so far, the tools it may call, the system
    prompt (``None``: none), the turn it answers, and where to send streamed deltas."""

    transcript: TranscriptView
    tools: tuple[ToolSnapshot, ...]
    system: str | None = None
    turn: int = 0
    on_delta: Callable[[ModelDelta], None] = _ignore


def _calls(value: Any) -> tuple[ModelToolCall, ...]:
    calls = tuple(value)
    for index, call in enumerate(calls):
        if not isinstance(call, ModelToolCall):
            raise TypeError(f"tool call {index} is a {type(call).__name__}, not a ModelToolCall")
        for field in ("id", "name", "model_name"):
            said = getattr(call, field)
            if not isinstance(said, str) and (said is not None or field != "model_name"):
                raise TypeError(f"the {field} of tool call {index} is "
                                f"{type(said).__name__}, not a string")
    return calls


def _usage(_: Any, __: Any, usage: Any) -> None:
    if usage is None:
        return
    if not isinstance(usage, Usage):
        raise TypeError(f"usage is a {type(usage).__name__}, not a Usage")
    for field in ("input_tokens", "output_tokens", "cached_tokens"):
        count = getattr(usage, field)
        if count is not None and (type(count) is not int or count < 0):
            raise TypeError(f"usage.{field} is {count!r}, not a number of tokens")


@attrs.frozen(kw_only=True)
class ModelMessage:
    """An assistant message: text, tool calls (with the model's own ids), why it stopped,
    and what the provider said about the exchange.

    ``stop_reason`` is the provider's own word, recorded as given. One that means the model
    was cut off at its token limit (:func:`truncated`: ``"length"``, ``"max_tokens"``,
    ``"incomplete"``, ...) makes the engine fail the message's calls without running them:
    their arguments may be truncated. ``model``, ``response_id`` and ``usage`` go on the
    record (:class:`~events.modelturns.ModelResponded`); ``provider_content`` keeps blocks the
    engine does not interpret, for the adapter to send back (:class:`~events.modelturns.
    ProviderContent`).

    Each field's type is checked when the message is made (a ``TypeError`` naming it), so
    what a model hands the session is a message the log can hold; a call's arguments may be
    anything, and the session bounds them.
    """

    text: str = attrs.field(default="", validator=_str)
    tool_calls: tuple[ModelToolCall, ...] = attrs.field(default=(), converter=_calls)
    stop_reason: str = attrs.field(default="stop", validator=_str)
    model: str | None = attrs.field(default=None, validator=_optional_str)
    response_id: str | None = attrs.field(default=None, validator=_optional_str)
    usage: Usage | None = attrs.field(default=None, validator=_usage)
    provider_content: ProviderContent | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.instance_of(ProviderContent)))


@attrs.frozen(kw_only=True)
class ModelInfo:
    """Who a model is, for the record: ``provider`` and ``model`` name it (``"openai"``,
    ``"gpt-4.1"``), ``api`` the provider's interface if it has several, ``settings`` the
    parameters it sends beside the transcript, ``stream`` whether it streams."""

    provider: str
    model: str
    api: str | None = None
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    stream: bool = False


class Model(Protocol):
    """The one method the session needs from a model. A model may also have an ``info``
    attribute (:class:`ModelInfo`), which the session records with each request."""

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next assistant message."""
        ...


def model_info(model: object) -> ModelInfo:
    """``model.info`` if it is a :class:`ModelInfo`, else one naming the model's class."""
    info = getattr(model, "info", None)
    if isinstance(info, ModelInfo):
        return info
    return ModelInfo(provider="custom", model=type(model).__name__)


class ModelError(ToolledgerError):
    """The model gave no assistant message: the provider's error (a 429 or 5xx after the
    client's retries, a timeout, a connection failure, a refusal, a rejected request).

    The session records it (:class:`~events.modelturns.ModelFailed`) and raises it to the host;
    the session stays consistent: ``resume()`` asks the model again, ``prompt()`` goes on
    with a new message. ``kind`` says which failure it is, ``status`` the HTTP status,
    ``request_id`` / ``response_id`` the provider's names for the exchange; the exception the
    client raised is its ``__cause__``.
    """

    def __init__(self, kind: ModelFailureKind, message: str, *, status: int | None = None,
                 request_id: str | None = None, response_id: str | None = None) -> None:
        super().__init__(message)
        self.kind: ModelFailureKind = kind
        self.message = message
        self.status = status
        self.request_id = request_id
        self.response_id = response_id
