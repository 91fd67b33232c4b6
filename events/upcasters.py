"""Old record shapes, carried forward: one upcaster per version step.

``UPCASTERS[n]`` turns a version-``n`` record dict into a version-``n + 1`` one (setting
``"v"`` to ``n + 1``); :func:`events.codec.upcast` applies them in a loop. A new version adds
one function here; old ones never change. This is the one place that knows how old logs
looked, so it is also the one place allowed to read their messages: what version 3 records
as fields, older versions said only in words, and the step to version 3 reads those words
once, here, so that nothing after the codec ever does.

- **1 → 2**: the hash chain. Events kept their shape; a version 1 line carries no hash.
- **2 → 3**: facts carry their data. The rule a policy decision or a policy denial names
  (``"denied by the rule 'rm_*'"``) becomes its ``rule``; what a failure's message says
  about a limit, a type or a value that is not JSON becomes its ``detail``
  (:class:`~events.types.FailureDetail`). A message this code did not write the way these
  patterns read gives no field: the record keeps its message, and a reader treats the fact as
  not recorded. A session's settings and whether an answer was given at a pause were never
  written down, not even in words: they stay unset (``None``).

Pure: no I/O.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from .errors import CodecError

__all__ = ["UPCASTERS", "Upcaster", "detail_from_message", "not_json_detail", "rule_from_reason"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _v1_to_v2(obj: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added the hash chain; events kept their shape. A version 1 line carries no
    hash (it was written before there was one), so a hash in one means the line was edited."""
    if "hash" in obj:
        raise CodecError("a version 1 record has a 'hash' field, which version 1 never wrote")
    return {**obj, "v": 2}


# The policy names its rule as the repr of a str: one quoted literal, nothing else (so
# literal_eval reads a string, never an expression a forged reason could nest as deep as it
# likes).
_REPR = r"""(?P<pattern>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_RULE_REASONS = {
    "deny": re.compile(rf"^denied by the rule {_REPR}$", re.S),
    "allow": re.compile(rf"^allowed by the rule {_REPR}$", re.S),
    "ask": re.compile(rf"^the rule {_REPR} asks$", re.S),
}
# (more digits than any real limit: past int()'s own bound too)
_DEPTH = re.compile(r"^nested calls may go (?P<limit>\d{1,9}) deep; ")
_SIZE = re.compile(r" (?:take|returned) (?P<size>\d{1,18}) bytes, over the limit of "
                   r"(?P<limit>\d{1,18})")
_RETURNED = re.compile(r" returned (?P<type>\S+), not a ToolResult$")
_NOT_SERIALISABLE = re.compile(r" is not JSON: (?P<problem>.*)$", re.S)
_NOT_JSON_ARGUMENTS = re.compile(r": not JSON \((?P<problem>.*)\)$", re.S)
_PROBLEM = re.compile(
    r"^(?P<path>\$\S*?): (?:a (?P<type>\S+) is not a JSON value"
    r"|object key (?P<key>.+) is not a string|(?P<number>.+) is not a JSON number"
    r"|nested more than (?P<depth>\d{1,9}) levels deep \(or contains itself\))$",
    re.S,
)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d{1,9})\]")  # a longer index is past any bound anyway


def rule_from_reason(decision: Any, reason: Any) -> str | None:
    """The pattern a policy reason of ``decision`` names, as the policy wrote it; else None."""
    pattern = _RULE_REASONS.get(decision) if isinstance(decision, str) else None
    match = pattern.match(reason) if pattern is not None and isinstance(reason, str) else None
    if match is None:
        return None
    try:
        rule = ast.literal_eval(match.group("pattern"))
    except (ValueError, SyntaxError):
        return None
    return rule if isinstance(rule, str) else None


def not_json_detail(problem: str) -> dict[str, Any] | None:
    """What :func:`engine.core.jsonvalues.ensure_json`'s words (``"$.a[1]: a set is not a JSON
    value"``) say, as a failure detail's fields; ``None`` if they do not read as its words."""
    match = _PROBLEM.match(problem)
    if match is None:
        return None
    text = match.group("path")[1:]
    path: list[str | int] = []
    at = 0
    for step in _STEP.finditer(text):
        if step.start() != at:
            return None
        at = step.end()
        key, index = step.group(1), step.group(2)
        path.append(key if key is not None else int(index))
    if at != len(text):
        return None
    if match.group("type") is not None:
        return {"path": path, "problem": "type", "type": match.group("type")}
    if match.group("key") is not None:
        # the key is reported at the path of the object that holds it
        return {"path": path, "problem": "key", "value": match.group("key")}
    if match.group("number") is not None:
        return {"path": path, "problem": "number", "value": match.group("number")}
    return {"path": path, "problem": "depth", "limit": int(match.group("depth"))}


def detail_from_message(kind: Any, message: Any) -> dict[str, Any] | None:
    """A failure detail's fields from the message of a failure of ``kind``, as the engine
    words it; ``None`` for a kind without one, or words it did not write."""
    if not isinstance(message, str):
        return None
    if kind == "depth_limit":
        match = _DEPTH.match(message)
        return {"limit": int(match.group("limit"))} if match else None
    if kind == "too_large":
        match = _SIZE.search(message)
        return ({"limit": int(match.group("limit")), "size": int(match.group("size"))}
                if match else None)
    if kind == "invalid_output":
        match = _RETURNED.search(message)
        return {"type": match.group("type")} if match else None
    if kind == "not_serialisable":
        match = _NOT_SERIALISABLE.search(message)
        return not_json_detail(match.group("problem")) if match else None
    if kind == "invalid_arguments":
        match = _NOT_JSON_ARGUMENTS.search(message)
        return not_json_detail(match.group("problem")) if match else None
    return None


def _v2_to_v3(obj: dict[str, Any]) -> dict[str, Any]:
    """Version 3 records as fields what version 2 said in words (see the module docstring).
    A field a version 2 line already has (``rule`` was added to it as an optional field) is
    kept as it is."""
    data = obj.get("data")
    kind = obj.get("type")
    if not isinstance(data, dict):
        return {**obj, "v": 3}
    if kind == "policy_decided" and "rule" not in data:
        rule = rule_from_reason(data.get("decision"), data.get("reason"))
        if rule is not None:
            data = {**data, "rule": rule}
    elif kind == "tool_call_denied" and "rule" not in data and data.get("by") == "policy":
        rule = rule_from_reason("deny", data.get("reason"))
        if rule is not None:
            data = {**data, "rule": rule}
    elif kind == "tool_call_failed" and "detail" not in data:
        detail = detail_from_message(data.get("kind"), data.get("message"))
        if detail is not None:
            data = {**data, "detail": detail}
    return {**obj, "v": 3, "data": data}


#: ``UPCASTERS[n]`` turns a version-``n`` record dict into a version-``n + 1`` one (setting
#: ``"v"`` to ``n + 1``). A new version adds one entry here; old entries never change.
UPCASTERS: dict[int, Upcaster] = {1: _v1_to_v2, 2: _v2_to_v3}
