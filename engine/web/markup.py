"""HTML that cannot carry what it quotes: every text from a log, a tool or a model is escaped
on its way into a page, at one seam.

A page is built from :class:`Safe` strings (markup this package wrote) and plain ``str`` (text
from outside). :func:`tag` escapes every plain string it is given, as an attribute value or as a
child, so a log's ``<script>`` shows as text and never runs; only a :class:`Safe` passes as it
is, and only this module and the page builders make one. Before escaping, :func:`text` writes
the characters a page should not hold as visible escapes (:func:`~engine.core.visible.visible`:
C0 and C1 controls, ``ESC``, bidi overrides, lone surrogates, which cannot even be encoded as
UTF-8), and cuts a long text to a bound, so one 10 MB value cannot make a page of 10 MB.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping
from typing import Any, Union

from ..core.visible import visible

__all__ = ["LIMIT", "Safe", "clip", "join", "tag", "text"]

#: How many characters of one text a page shows; the rest is counted, not shown.
LIMIT = 4000

Child = Union["Safe", str, int, float, None, Iterable[Any]]


class Safe(str):
    """Markup that is already escaped: what :func:`tag` and :func:`text` return."""

    __slots__ = ()


def clip(value: str, limit: int = LIMIT) -> str:
    """``value``, cut to ``limit`` characters with a note of how many were left out."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit} more characters)"


def text(value: object, limit: int = LIMIT) -> Safe:
    """``value`` (a ``str``, else its JSON) as escaped, visible, bounded HTML text."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, default=repr)
    return Safe(html.escape(visible(clip(value, limit)), quote=True))


def join(children: Iterable[Child]) -> Safe:
    """The children side by side: each :class:`Safe` as it is, every other text escaped."""
    parts: list[str] = []
    for child in children:
        if child is None:
            continue
        if isinstance(child, Safe):
            parts.append(child)
        elif isinstance(child, (str, int, float)):
            parts.append(text(str(child)))
        else:
            parts.append(join(child))
    return Safe("".join(parts))


def tag(name: str, attributes: Mapping[str, object] | None = None, *children: Child) -> Safe:
    """``<name attributes>children</name>``, with each attribute value and each plain child
    escaped. An attribute whose value is ``None`` or ``False`` is left out, ``True`` is
    written bare. ``name`` and the attribute names are this package's own, never a log's."""
    written = [name]
    for key, value in (attributes or {}).items():
        if value is None or value is False:
            continue
        written.append(key if value is True else f'{key}="{text(str(value), 10 * LIMIT)}"')
    opening = f"<{' '.join(written)}>"
    if name in ("input", "meta", "link", "br"):
        return Safe(opening)
    return Safe(f"{opening}{join(children)}</{name}>")
