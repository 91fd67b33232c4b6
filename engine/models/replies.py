"""Reading a provider's reply: each field checked as it is read, so that whatever a provider
sends reaches the session as an assistant message or as a :class:`ModelError` naming what was
wrong, never as another exception.

The official SDKs build their response objects without validating them: a field the provider
sent as null, as another type, or not at all reaches the adapter as it came, and a part the SDK
could not type is left a dict. An adapter therefore reads a reply through :class:`Part`, which
takes both, checks the type of every field it hands out, and raises a ``ModelError`` (kind
``error``) that names the field and what it held (``choices[0].message.tool_calls[0].function
.name is null, not a string``). What the SDK itself fails on while it reads (a body that is not
JSON, JSON nested past what the parser can read, a stream its helpers cannot assemble) is
turned into the same error by :func:`reading`. Either way the turn fails, is recorded as
``model_failed``, and ``resume()`` asks the model again.

What the provider controls inside a well-formed reply is checked further on, by the session:
a call's arguments (kept as JSON, depth and size bounded, else the call alone fails), names and
ids (cut to :data:`engine.core.limits.MAX_NAME` characters).

:class:`Streamed` hands a streaming message's pieces to the session's subscribers, checked
as they go (:class:`ModelDelta` checks its fields).

Pure: no SDK is imported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .protocol import ModelDelta, ModelError, ModelMessage, ModelRequest
from .toolnames import ToolNames

__all__ = ["Part", "Streamed", "reading", "sendable"]

#: What a reply's value may be that is not an object of it (an SDK object, or a dict).
_NOT_OBJECTS = (str, int, float, bool, list, tuple, type(None))

_HINT = "resume() asks the model again"
#: Counts are below it: a 64-bit signed integer holds them.
_LARGEST = 2**63
#: How much of an exception's message about a reply is repeated (it may quote the reply).
_SAID = 300


def _kind(value: Any) -> str:
    """What ``value`` is, in a reply's words (its text is not repeated: it is the provider's)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "an object"


class Part:
    """An object of a provider's reply (the SDK's object, or a dict), read field by field.

    ``where`` is its path in the reply, for messages; ``api`` names the format (``"Chat
    Completions"``); ``response_id`` goes on every error raised while reading. Example::

        >>> reply = Part.of({"id": "r1", "choices": None}, "Chat Completions")
        >>> reply.items("choices")
        []
        >>> reply.text("id")
        'r1'
        >>> reply.text("model")
        Traceback (most recent call last):
        engine.models.protocol.ModelError: the provider's reply is not a valid Chat Completions \
response: model is null, not a string (resume() asks the model again)
    """

    __slots__ = ("api", "response_id", "value", "where")

    def __init__(self, value: Any, where: str, api: str, response_id: str | None) -> None:
        self.value = value
        self.where = where
        self.api = api
        self.response_id = response_id

    @classmethod
    def of(cls, reply: Any, api: str) -> Part:
        """The whole reply (an object, else a ``ModelError``), its ``id`` read if it is one."""
        found = cls(reply, "", api, None)
        found.check(reply, "", "an object", isinstance(reply, _NOT_OBJECTS))
        identifier = found.get("id")
        found.response_id = identifier if isinstance(identifier, str) else None
        return found

    def error(self, message: str) -> ModelError:
        """A ``ModelError`` saying the reply is not valid, and ``message`` why."""
        return ModelError("error", f"the provider's reply is not a valid {self.api} response: "
                          f"{message} ({_HINT})", response_id=self.response_id)

    def check(self, value: Any, name: str, wanted: str, wrong: bool) -> None:
        """Raise :meth:`error` naming field ``name`` if ``wrong``."""
        if wrong:
            raise self.error(f"{self._path(name)} is {_kind(value)}, not {wanted}")

    def _path(self, name: str) -> str:
        if not name:
            return self.where or "the body"
        return f"{self.where}.{name}" if self.where else name

    def get(self, name: str) -> Any:
        """Field ``name`` as it came (``None`` if absent)."""
        if isinstance(self.value, dict):
            return self.value.get(name)
        return getattr(self.value, name, None)

    def _part(self, value: Any, name: str) -> Part:
        self.check(value, name, "an object", isinstance(value, _NOT_OBJECTS))
        return Part(value, self._path(name), self.api, self.response_id)

    def part(self, name: str) -> Part:
        """Field ``name``, an object."""
        return self._part(self.get(name), name)

    def optional_part(self, name: str) -> Part | None:
        """Field ``name``, an object or absent (``None``)."""
        value = self.get(name)
        return None if value is None else self._part(value, name)

    def items(self, name: str) -> list[Part]:
        """Field ``name``, a list of objects (absent: none)."""
        value = self.get(name)
        if value is None:
            return []
        self.check(value, name, "a list", not isinstance(value, (list, tuple)))
        return [self._part(item, f"{name}[{index}]") for index, item in enumerate(value)]

    def text(self, name: str) -> str:
        """Field ``name``, a string."""
        value = self.get(name)
        self.check(value, name, "a string", not isinstance(value, str))
        return value  # type: ignore[no-any-return]

    def optional_text(self, name: str) -> str | None:
        """Field ``name``, a string or absent (``None``)."""
        value = self.get(name)
        return None if value is None else self.text(name)

    def count(self, name: str) -> int | None:
        """Field ``name``, a count (of tokens: a whole number from 0 below 2**63, what every
        reader of the log, OpenTelemetry's included, can hold) or absent (``None``)."""
        value = self.get(name)
        if value is None:
            return None
        self.check(value, name, "a count", isinstance(value, bool)
                   or not isinstance(value, int) or not 0 <= value < _LARGEST)
        return int(value)


def _unicode(value: Any) -> bool:
    """Whether every string in ``value`` is Unicode that UTF-8 can carry: JSON's ``\\u``
    escapes can name half of a surrogate pair, which no request can."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    except (ValueError, TypeError, RecursionError):  # not JSON: the session refuses it itself
        return True
    return True


def sendable(message: ModelMessage, reply: Part) -> ModelMessage:
    """``message`` if what the adapter will send back of it on the next turn (its text, its
    calls, the provider's own content) can be sent; else the reply's error, naming the part.
    A message the provider could not be sent again would fail every later turn."""
    content = message.provider_content
    parts: list[tuple[str, Any]] = [("the text", message.text)]
    parts += [(f"tool call {index}", [call.id, call.name, call.arguments])
              for index, call in enumerate(message.tool_calls)]
    parts.append(("the provider's content", None if content is None else content.items))
    for where, value in parts:
        if not _unicode(value):
            raise reply.error(f"{where} is not valid Unicode (half of a surrogate pair)")
    return message


class Streamed:
    """A message while it streams: each piece of its text, or of a call's arguments, goes to
    the request's subscribers as a :class:`ModelDelta`, the call's place in the message, its
    id and its tool's name with it. ``key`` is the provider's name for a call in its stream
    (a block's or an output item's index)."""

    __slots__ = ("_calls", "_names", "_request")

    def __init__(self, request: ModelRequest, names: ToolNames) -> None:
        self._request = request
        self._names = names
        self._calls: dict[Any, tuple[int, str | None, str | None]] = {}

    def text(self, piece: Any) -> None:
        """A piece of the message's text."""
        self._request.on_delta(ModelDelta(turn=self._request.turn, kind="text", text=piece))

    def call(self, key: Any, call_id: Any, name: Any) -> None:
        """A call began (said again, it is the same call): its model id, if said, and name."""
        if key not in self._calls:
            self._calls[key] = (len(self._calls), call_id, self._names.read(name)[0])

    def arguments(self, key: Any, piece: Any) -> None:
        """A piece of the arguments of the call ``key``, if one began under it."""
        found = self._calls.get(key)
        if found is not None:
            index, call_id, name = found
            self._request.on_delta(ModelDelta(turn=self._request.turn, kind="arguments",
                                              text=piece, index=index, call_id=call_id,
                                              name=name))


@contextmanager
def reading(api: str, sdk_errors: type[BaseException]) -> Iterator[None]:
    """Around the code that reads a reply (the SDK's parsing, its stream helpers, the adapter's
    own reading): whatever it raises, other than a ``ModelError``, the SDK's own errors
    (``sdk_errors``, which the adapter maps) and cancellation, becomes a ``ModelError`` saying
    the reply could not be read, with the exception as its cause."""
    try:
        yield
    except (ModelError, sdk_errors):
        raise
    except RecursionError as exc:
        raise ModelError("error", f"the provider's {api} reply is nested too deeply to read "
                                  f"({_HINT})") from exc
    except Exception as exc:
        raise ModelError("error", f"the provider's {api} reply could not be read: "
                                  f"{type(exc).__name__}: {str(exc)[:_SAID]} ({_HINT})") from exc
