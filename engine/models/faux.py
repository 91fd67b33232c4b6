"""The faux model: a script of assistant messages, for tests and demos.

:class:`FauxModel` replays a script, one step per request, and records the requests it got:
it is how the engine is exercised without a network. With ``stream=True`` it also sends each
message's text and arguments to the session's live subscribers as deltas, as a streaming
adapter does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Union

import attrs

from events.types import ModelToolCall

from .protocol import ModelDelta, ModelInfo, ModelMessage, ModelRequest

__all__ = [
    "FauxModel",
    "FauxScriptExhausted",
    "faux_message",
    "faux_text",
    "faux_tool_call",
]


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

    def __init__(self, script: Sequence[FauxStep], *, stream: bool = False) -> None:
        self._script = list(script)
        self._stream = stream
        #: What the session records about this model with each request.
        self.info = ModelInfo(provider="faux", model="faux", stream=stream)
        self._next = 0
        #: Every request received, in order.
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """Steps not yet used."""
        return len(self._script) - self._next

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next scripted message; raises :class:`FauxScriptExhausted` past the end."""
        message = self._next_message(request)
        if self._stream:
            _send_deltas(message, request)
        return message

    def _next_message(self, request: ModelRequest) -> ModelMessage:
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


def _send_deltas(message: ModelMessage, request: ModelRequest) -> None:
    """The message to the session's subscribers, word by word and call by call."""
    words = message.text.split(" ")
    for index, word in enumerate(words):
        piece = word if index == len(words) - 1 else word + " "
        if piece:
            request.on_delta(ModelDelta(turn=request.turn, kind="text", text=piece))
    for index, call in enumerate(message.tool_calls):
        try:
            arguments = json.dumps(call.arguments)
        except (TypeError, ValueError):
            arguments = repr(call.arguments)
        request.on_delta(ModelDelta(turn=request.turn, kind="arguments", text=arguments,
                                    index=index, call_id=call.id, name=call.name))
