"""Which call a ``ctx.execute_tool`` is: a new nested call, or one the log already holds.

A body that runs again after a restart (an idempotent tool whose first run the process did not
see to the end) asks for its nested calls again, and every call its first run recorded must
answer the request that is *the same call*, never another one. Ids cannot tell: a body that
makes nested calls concurrently gets its ids in the order the scheduler happened to run its
tasks, which differs from one run to the next. So the log's calls are matched by what they
are: a recorded call answers a request only if its tool name and its arguments (as canonical
JSON: keys sorted) are the same, and several identical calls are matched in the order they were
recorded. Whatever order the scheduler picks, each request gets its own call.

A request that no recorded call answers, for a tool with no unanswered recorded call, is new
(the next free id): the first run had not got that far. A request that no recorded call
answers while a recorded call *of the same tool* is still unanswered is either that call,
changed (the body now asks for other arguments), or a sibling that the first run had not asked
for yet while the recorded one was asked (concurrent children, the log cut between them). Only
what the body does next tells: the runtime waits until every other task the body started is
blocked (its siblings have asked for what they ask for), then decides
(``match(..., decide=True)``). If the recorded call is
still unanswered, the request ends as a ``mismatch`` error outcome naming the difference
(recorded, never run), for the body to handle: it is not handed the other call's result, and
it is not run either, since the recorded call may already have done what the body now asks for
in other words. Otherwise it is new.

Recorded calls that no request matched by the time the body returns are cancelled (the body
no longer asks for them); a recorded call that had ended stays as it was.

A first run has nothing recorded, so every request is new and the ids are ``"{parent}/{n}"`` in
the order of the requests, as before. Pure: no trio, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from events.renamed import renamed_attribute, warn_renamed

__all__ = ["Match", "NestedCalls", "canonical", "first_difference"]


def canonical(value: Any) -> str:
    """``value`` as canonical JSON (keys sorted, no spaces): equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


@attrs.frozen(kw_only=True)
class Match:
    """What a request is: ``call_id``, whether the log holds it (``recorded``: continue it
    from its state), and for a mismatch the recorded call of the same tool it differs from."""

    call_id: str
    recorded: bool = False
    differs_from: str | None = None


class NestedCalls:
    """The nested calls of one run of a body: the recorded ones not yet asked for again, and
    the next free index. ``recorded`` is the log's nested calls of ``parent_id`` in the order
    they were requested, each as ``(call_id, name, requested arguments)``. ``taken`` are
    recorded calls no request may match (a program that goes on from its recorded state
    made them before): only new ids are drawn past them."""

    def __init__(self, parent_id: str, recorded: Iterable[tuple[str, str, Any]], *,
                 taken: Iterable[str] = ()) -> None:
        self._parent_id = parent_id
        self._unanswered: list[tuple[str, str, str]] = []
        last = -1
        for call_id in taken:
            index = call_id.rpartition("/")[2]
            if index.isdigit():
                last = max(last, int(index))
        for call_id, name, arguments in recorded:
            self._unanswered.append((call_id, name, canonical(arguments)))
            index = call_id.rpartition("/")[2]
            if index.isdigit():
                last = max(last, int(index))
        self._next = last + 1

    def match(self, name: str, arguments: Any, *, decide: bool = True) -> Match | None:
        """The call a request of tool ``name`` with ``arguments`` (admitted JSON) is.

        When no recorded call answers it but one of the same tool is still unanswered, the
        request may be that call changed (a mismatch) or a sibling the first run had not asked
        for yet: with ``decide=False`` that is ``None`` (ask again once the siblings had their
        turn), with ``decide=True`` a mismatch if a recorded call of the tool is unanswered
        still, else a new call."""
        same_tool: str | None = None
        if self._unanswered:
            key = canonical(arguments)
            for position, (call_id, recorded_name, recorded_key) in enumerate(self._unanswered):
                if recorded_name != name:
                    continue
                if recorded_key == key:
                    del self._unanswered[position]
                    return Match(call_id=call_id, recorded=True)
                same_tool = same_tool or call_id
        if same_tool is None:
            return Match(call_id=self._new_id())
        if not decide:
            return None
        return Match(call_id=self._new_id(), differs_from=same_tool)

    def new_call(self) -> str | None:
        """The id of the next new call when no recorded call is left unanswered (a body's
        first run, always): what :meth:`match` would give any request then, without canonical
        JSON or a :class:`Match` per request. ``None`` while recorded calls are unanswered:
        ask :meth:`match`."""
        if self._unanswered:
            return None
        return self._new_id()

    def claim(self, name: str, arguments: Any, *, decide: bool = True) -> Match | None:
        """The old name of :meth:`match` (it warns): the stores own the word "claim"."""
        warn_renamed("NestedCalls.claim", "NestedCalls.match")
        return self.match(name, arguments, decide=decide)

    def unanswered(self) -> tuple[str, ...]:
        """The recorded calls no request has matched (in the order recorded)."""
        return tuple(call_id for call_id, _, _ in self._unanswered)

    def _new_id(self) -> str:
        call_id = f"{self._parent_id}/{self._next}"
        self._next += 1
        return call_id


def _show(value: Any, limit: int = 80) -> str:
    if value is _MISSING:
        return "absent"
    text = canonical(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


def first_difference(before: Any, now: Any) -> str:
    """Where two JSON values first differ, as ``"at $.to: "alice" then, "bob" now"``: the
    first path (keys in sorted order, then list positions) whose values differ. Walks without
    recursion, so no depth can break it."""
    stack: list[tuple[str, Any, Any]] = [("$", before, now)]
    while stack:
        path, a, b = stack.pop()
        if a is _MISSING or b is _MISSING:
            return f"at {path}: {_show(a)} then, {_show(b)} now"
        if type(a) is not type(b) or not isinstance(a, (dict, list)):
            if canonical(a) != canonical(b):
                return f"at {path}: {_show(a)} then, {_show(b)} now"
            continue
        if isinstance(a, dict):
            for key in sorted(set(a) | set(b), reverse=True):
                where = f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
                if key not in a:
                    stack.append((where, _MISSING, b[key]))
                elif key not in b:
                    stack.append((where, a[key], _MISSING))
                else:
                    stack.append((where, a[key], b[key]))
        else:
            if len(a) != len(b):
                return f"at {path}: {len(a)} items then, {len(b)} now"
            for index in reversed(range(len(a))):
                stack.append((f"{path}[{index}]", a[index], b[index]))
    return "nowhere (the values are equal)"


class _MissingType:
    """Stands for a key one side lacks, in :func:`first_difference`'s message."""


_MISSING = _MissingType()


_RENAMED = {"Claim": "Match"}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
