"""Finding deferred tools: the search tool a host can enable, and its ranking.

Codemode and deferred tools wait to be activated, so the model is not told about them. The
search tool is how the model finds them: it asks for tools by a few words, the best matches
are activated (``ctx.activate``, recorded as ``tools_activated`` with the search call's id)
and declared to the model from its next request on. Hidden tools are never found: they wait
for the host (``set_active_tools``, ``activate``).

The ranking (:func:`rank_tools`) is pure and deterministic: the same words and the same
registered tools give the same names in the same order, in the live session, in a fold and in
a replay. A query word counts 3 when it is a word of the tool's name, 1 when it is a word of its
title or description; a word of four letters or more also matches the words it begins or that
begin it ("file" finds "files", "delete" finds "deleted"). Ties go to the name in alphabetical
order. Nothing here does I/O; the tool's body reads the session's tools through its ctx.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from typing import Any

from events.results import ToolResult, text
from events.types import Annotations, ToolSnapshot

from .tools import ToolCall, ToolSpec

__all__ = ["SEARCHABLE", "rank_tools", "search_tool", "words"]

#: The exposures the search tool finds: the ones waiting to be activated, but hidden.
SEARCHABLE = frozenset({"codemode", "deferred"})

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_PREFIX = 4  # letters a word needs before it also matches the words it begins


def words(text: str) -> tuple[str, ...]:
    """The lowercase words of ``text``: ``"readFile_v2"`` is ``("read", "file", "v2")``."""
    return tuple(_WORD.findall(_CAMEL.sub(r"\1 \2", text).lower()))


def _matches(word: str, vocabulary: Set[str]) -> bool:
    if word in vocabulary:
        return True
    return len(word) >= _PREFIX and any(
        len(other) >= _PREFIX and (other.startswith(word) or word.startswith(other))
        for other in vocabulary)


def _score(asked: Iterable[str], tool: ToolSnapshot) -> int:
    name = set(words(tool.name))
    described = set(words(f"{tool.annotations.title or ''} {tool.description}"))
    return sum(3 if _matches(word, name) else 1 if _matches(word, described) else 0
               for word in asked)


def rank_tools(query: str, tools: Iterable[ToolSnapshot], *, limit: int = 5) -> tuple[str, ...]:
    """The names of at most ``limit`` codemode and deferred ``tools`` that match ``query``,
    best first (see the module docstring). Example::

        rank_tools("delete a file", session.state.tools.values())
    """
    asked = tuple(dict.fromkeys(words(query)))
    scored = [(-score, tool.name) for tool in tools
              if tool.exposure in SEARCHABLE and (score := _score(asked, tool)) > 0]
    return tuple(name for _, name in sorted(scored)[:max(limit, 0)])


_INPUT = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500,
                             "description": "a few words saying what the tool should do"}},
    "required": ["query"],
    "additionalProperties": False,
}
_OUTPUT = {
    "type": "object",
    "properties": {
        "matches": {"type": "array", "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
            "required": ["name", "description"]}},
        "activated": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["matches", "activated"],
}


def search_tool(*, name: str = "search_tools", limit: int = 5) -> ToolSpec:
    """The search tool, to register with a session so that the model can find codemode and
    deferred tools by words: the best ``limit`` matches are activated for its next request.

    It declares itself read-only, not destructive, idempotent and closed-world (it changes
    what the model is told, nothing else), so the default policy runs it without asking.
    Example::

        async with Session.open(store, model=model, tools=[*tools, search_tool()]) as session:
            ...
    """
    if limit < 1:
        raise ValueError(f"search_tool(limit={limit}): find at least one tool")

    async def execute(call: ToolCall, ctx: Any) -> ToolResult:
        tools = ctx.tools
        found = rank_tools(call.arguments["query"], tools.values(), limit=limit)
        added = ctx.activate(found)
        matches = [{"name": found_name, "description": tools[found_name].description}
                   for found_name in found]
        if not found:
            said = f"No tool matches {call.arguments['query']!r}."
        else:
            lines = [f"- {m['name']}: {m['description']}" for m in matches]
            said = ("These tools are yours from your next turn:\n" + "\n".join(lines))
        return ToolResult(content=[text(said)],
                          structured_content={"matches": matches, "activated": list(added)})

    return ToolSpec(
        name=name,
        description=("Find more tools by what they do: give a few words; the tools that match "
                     "are available from your next turn."),
        input_schema=_INPUT,
        output_schema=_OUTPUT,
        annotations=Annotations(title="Search tools", read_only=True, destructive=False,
                                idempotent=True, open_world=False),
        execute=execute,
    )
