"""Tool names a provider can take, both ways.

A tool's name follows MCP's rule: 1 to 128 characters of ``[A-Za-z0-9_.-]``. OpenAI (Chat
Completions and Responses) and Anthropic (Messages) take only ``[a-zA-Z0-9_-]{1,64}`` and
reject a request that declares any other name (HTTP 400). So their adapters never send a name
as it is unless the provider takes it: :class:`ToolNames` gives each tool of a request a name
the provider takes, and reads the names in the reply back.

The rule, deterministic and without collisions:

- a name the provider takes is sent as it is (almost every name: nothing changes for them);
- any other name becomes its characters with each one the provider does not take replaced by
  ``_``, cut to 64 (``notes.read`` is sent as ``notes_read``); if that is already a name of
  the request (a tool really called ``notes_read``, or another name that became it), a suffix
  ``_2``, ``_3``, ... makes it one that is not. Names are given in sorted order, so the same
  names always get the same provider names, whatever order the tools were declared in.

The names of a request are its declared tools' and those its transcript's calls carry (a call
of a tool that is no longer declared is still sent back under a name the provider takes). A
name in the reply that one of them was sent as is read back as that tool's name; any other
name is read as it is (a tool the model was not told of fails as unavailable). Each call whose
name was read back from another records the name the model wrote
(:attr:`~events.types.ModelToolCall.model_name`), so the log shows both, and a re-drive answers
from the log with both.

Pure: no SDK is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from events.types import AssistantMessage, ModelToolCall

from .protocol import ModelRequest

__all__ = ["PROVIDER_NAME", "ToolNames"]

#: The names OpenAI and Anthropic take for a tool.
PROVIDER_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_LONGEST = 64
_NOT_TAKEN = re.compile(r"[^a-zA-Z0-9_-]")


def _taken_form(name: str) -> str:
    return _NOT_TAKEN.sub("_", name)[:_LONGEST] or "_"


class ToolNames:
    """The provider's names for the tools of one request, both ways (see the module).

    Example::

        >>> names = ToolNames(["notes.read", "notes_read", "lookup"])
        >>> names.sent("lookup"), names.sent("notes_read"), names.sent("notes.read")
        ('lookup', 'notes_read', 'notes_read_2')
        >>> names.read("notes_read_2"), names.read("notes_read"), names.read("other")
        (('notes.read', 'notes_read_2'), ('notes_read', None), ('other', None))
    """

    __slots__ = ("_read", "_sent")

    def __init__(self, names: Iterable[str]) -> None:
        every = sorted(set(names))
        self._sent = {name: name for name in every if PROVIDER_NAME.fullmatch(name)}
        taken = set(self._sent)
        for name in every:
            if name in self._sent:
                continue
            base = candidate = _taken_form(name)
            number = 1
            while candidate in taken:
                number += 1
                suffix = f"_{number}"
                candidate = base[:_LONGEST - len(suffix)] + suffix
            taken.add(candidate)
            self._sent[name] = candidate
        self._read = {sent: name for name, sent in self._sent.items()}

    @classmethod
    def of(cls, request: ModelRequest) -> ToolNames:
        """The names of ``request``: its declared tools' and its transcript's calls'."""
        names = {tool.name for tool in request.tools}
        for entry in request.transcript:
            if isinstance(entry, AssistantMessage):
                names.update(call.name for call in entry.tool_calls)
        return cls(names)

    def sent(self, name: str) -> str:
        """The name the provider is given for the tool ``name``."""
        return self._sent.get(name) or _taken_form(name)

    def read(self, name: str) -> tuple[str, str | None]:
        """The tool a name in the reply stands for, and the name as the model wrote it if that
        is another (else ``None``)."""
        tool = self._read.get(name, name)
        return tool, (name if tool != name else None)

    def call(self, call_id: str, name: str, arguments: Any) -> ModelToolCall:
        """A call of the reply, as the session takes it: the tool's name read back from
        ``name`` (:meth:`read`), and ``name`` kept beside it if it was another."""
        tool, written = self.read(name)
        return ModelToolCall(id=call_id, name=tool, arguments=arguments, model_name=written)
