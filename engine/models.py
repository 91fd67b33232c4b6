"""Models: what the session asks for the next assistant message, and the faux model.

A model is anything with ``async def complete(request) -> ModelMessage``. The request holds
the transcript (a read-only view, shared with the session: no copy per turn) and the tools
declared to the model. :class:`FauxModel` replays a script, for tests and demos: it is how the
engine is exercised without a network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, Union

import attrs

from events.fastinit import fast_init
from events.types import ModelToolCall, ToolSnapshot

from .reducers import TranscriptView

__all__ = [
    "TRUNCATED_STOP_REASONS",
    "FauxModel",
    "FauxScriptExhausted",
    "Model",
    "ModelMessage",
    "ModelRequest",
    "faux_message",
    "faux_text",
    "faux_tool_call",
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


@fast_init
@attrs.frozen(kw_only=True)
class ModelRequest:
    """What a model is given: the transcript so far and the tools it may call."""

    transcript: TranscriptView
    tools: tuple[ToolSnapshot, ...]


def _calls(value: Any) -> tuple[ModelToolCall, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ModelMessage:
    """An assistant message: text, tool calls (with the model's own ids), why it stopped.

    ``stop_reason`` is the provider's own word, recorded as given. One that means the model
    was cut off at its token limit (:func:`truncated`: ``"length"``, ``"max_tokens"``,
    ``"incomplete"``, ...) makes the engine fail the message's calls without running them:
    their arguments may be truncated.
    """

    text: str = ""
    tool_calls: tuple[ModelToolCall, ...] = attrs.field(default=(), converter=_calls)
    stop_reason: str = attrs.field(default="stop", validator=attrs.validators.instance_of(str))


class Model(Protocol):
    """The one method the session needs from a model."""

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next assistant message."""
        ...


@attrs.frozen(kw_only=True)
class FauxText:
    """A text block of a scripted message."""

    text: str


@attrs.frozen(kw_only=True)
class FauxToolCall:
    """A tool call block of a scripted message; ``id`` defaults to a fresh one per step."""

    name: str
    arguments: Any
    id: str | None = None


FauxBlock = Union[FauxText, FauxToolCall]
FauxStep = Union[
    ModelMessage, FauxBlock, Sequence[FauxBlock], Callable[[ModelRequest], ModelMessage]
]


def faux_text(text: str) -> FauxText:
    """A scripted text block; alone, a message that ends the turn."""
    return FauxText(text=text)


def faux_tool_call(name: str, arguments: Any = None, *, id: str | None = None) -> FauxToolCall:
    """A scripted tool call; alone, a message with one call; in a list, one of a batch."""
    return FauxToolCall(name=name, arguments={} if arguments is None else arguments, id=id)


def faux_message(blocks: Sequence[FauxBlock], *, stop_reason: str = "stop") -> ModelMessage:
    """A scripted message from blocks, with a chosen stop reason (e.g. ``"max_tokens"``)."""
    return _message(blocks, step=0, stop_reason=stop_reason)


def _message(blocks: Sequence[FauxBlock], *, step: int, stop_reason: str = "stop") -> ModelMessage:
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    for block in blocks:
        if isinstance(block, FauxText):
            texts.append(block.text)
        elif isinstance(block, FauxToolCall):
            call_id = block.id or f"faux_{step}_{len(calls)}"
            calls.append(ModelToolCall(id=call_id, name=block.name, arguments=block.arguments))
        else:
            raise TypeError(f"a faux message is made of faux_text and faux_tool_call, not {block!r}")
    return ModelMessage(text="\n".join(texts), tool_calls=tuple(calls), stop_reason=stop_reason)


class FauxScriptExhausted(AssertionError):
    """The session asked the faux model for more steps than its script has."""


class FauxModel:
    """A model that replays a script, one step per request, and records the requests.

    Each step is a :class:`ModelMessage`, one block (``faux_text`` or ``faux_tool_call``), a
    list of blocks (several calls make a parallel batch), or a factory ``(request) ->
    ModelMessage`` that can look at what the model was sent. Example::

        model = FauxModel([faux_tool_call("stat_file", {"path": "README.md"}), faux_text("ok")])
    """

    def __init__(self, script: Sequence[FauxStep]) -> None:
        self._script = list(script)
        self._next = 0
        #: Every request received, in order.
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._script) - self._next

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next scripted message; raises :class:`FauxScriptExhausted` past the end."""
        self.requests.append(request)
        if self._next >= len(self._script):
            raise FauxScriptExhausted(
                f"the faux model's script has {len(self._script)} steps and the session asked "
                f"for step {self._next + 1}: add a step (e.g. faux_text('done')) to end the turn"
            )
        step = self._script[self._next]
        index = self._next
        self._next += 1
        if isinstance(step, ModelMessage):
            return step
        if isinstance(step, (FauxText, FauxToolCall)):
            return _message([step], step=index)
        if callable(step):
            message = step(request)
            if not isinstance(message, ModelMessage):
                raise TypeError(f"faux step {index + 1} returned {message!r}, not a ModelMessage")
            return message
        return _message(step, step=index)

    def assert_complete(self) -> None:
        """Fail if the script has steps the session never asked for."""
        if self.remaining:
            raise AssertionError(
                f"the faux model has {self.remaining} unused step(s) of {len(self._script)}"
            )
