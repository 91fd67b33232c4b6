"""Recorded payloads with one field changed: what a broken or hostile provider sends.

A reply is edited as JSON (:func:`replaced`, :func:`removed` at a path :func:`paths` lists)
and written back as the provider would write it (:func:`body`), with what ``json.dumps``
cannot write: :class:`Deep` (an array nested that many levels, as raw text) and ``NaN`` /
``Infinity`` (which Python's JSON reader, and so the SDKs, accept). A stream is a list of
server-sent events (:func:`events`), each edited the same way in its ``data``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from tests.models.server import PAYLOADS, Reply

Path = tuple[str | int, ...]


@attrs.frozen
class Deep:
    """An array nested ``levels`` deep, written as text: no recursive writer could."""

    levels: int


_MARK = "\x00deep:"


def _marked(value: Any) -> Any:
    if isinstance(value, Deep):
        return f"{_MARK}{value.levels}"
    if isinstance(value, dict):
        return {key: _marked(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_marked(child) for child in value]
    return value


def dumps(value: Any) -> str:
    """``value`` as JSON text, :class:`Deep` values written out in full."""
    return re.sub(r'"\\u0000deep:(\d+)"', lambda m: "[" * int(m[1]) + "]" * int(m[1]),
                  json.dumps(_marked(value)))


def load(api: str, name: str) -> Any:
    """The recorded JSON payload ``name`` of ``api``."""
    return json.loads((PAYLOADS / api / f"{name}.json").read_text())


def paths(value: Any, at: Path = ()) -> list[Path]:
    """Every place in ``value``: the root, then each member and item, depth first."""
    found = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(paths(child, (*at, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(paths(child, (*at, index)))
    return found


def _parent(value: Any, path: Path) -> tuple[Any, Any]:
    """A copy of ``value``, and the object or list in it that holds ``path``'s last step."""
    copy = json.loads(json.dumps(value))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    return copy, parent


def replaced(value: Any, path: Path, new: Any) -> Any:
    """A copy of ``value`` with ``new`` at ``path``."""
    if not path:
        return new
    copy, parent = _parent(value, path)
    parent[path[-1]] = new
    return copy


def removed(value: Any, path: Path) -> Any:
    """A copy of ``value`` without the member at ``path`` (an item becomes ``null``)."""
    if not path:
        return None
    copy, parent = _parent(value, path)
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = None
    return copy


def body(value: Any) -> Reply:
    """A JSON reply with ``value`` as its body."""
    return Reply(body=dumps(value).encode())


# -- streams ------------------------------------------------------------------------------------

Event = tuple[str | None, Any]  # (the event's name, its data: JSON, or the text if it is not)


def events(api: str, name: str) -> list[Event]:
    """The recorded stream ``name`` of ``api`` as events."""
    found: list[Event] = []
    for block in (PAYLOADS / api / f"{name}.sse").read_text().split("\n\n"):
        kind, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        if data is None:
            continue
        try:
            found.append((kind, json.loads(data)))
        except ValueError:
            found.append((kind, data))  # [DONE]
    return found


def stream(found: list[Event]) -> Reply:
    """``found`` as a server-sent event stream."""
    blocks = []
    for kind, data in found:
        text = data if isinstance(data, str) and data == "[DONE]" else dumps(data)
        blocks.append((f"event: {kind}\n" if kind is not None else "") + f"data: {text}\n")
    return Reply(body="\n".join(blocks).encode() + b"\n", content_type="text/event-stream")
