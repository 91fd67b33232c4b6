"""A docstring read as a tool's description and its parameters' descriptions.

The text before the first section is the description (the summary line and any paragraphs
after it). The parameters are described by an ``Args:`` section (Google style, also spelled
``Arguments:`` or ``Parameters:``), a ``Parameters`` section underlined with dashes (NumPy
style), or ``:param name:`` fields (Sphinx style); a class's ``Attributes:`` section
describes its fields the same way. Every other section (``Returns:``, ``Raises:``,
``Examples``, ...) ends the description and is left out. Pure: text in, text out.

Google::

    Add two numbers.

    Args:
        a: The first.
        b (int): The second, which may take
            more than one line.

NumPy::

    Add two numbers.

    Parameters
    ----------
    a : int
        The first.
"""

from __future__ import annotations

import inspect
import re
from typing import Final

import attrs

__all__ = ["Docstring", "read_docstring"]

_GOOGLE_PARAMS: Final = frozenset({"args", "arguments", "parameters", "params",
                                   "keyword args", "keyword arguments", "attributes"})
_GOOGLE_HEADING: Final = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_NUMPY_RULE: Final = re.compile(r"^-{3,}\s*$")
_GOOGLE_ITEM: Final = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ITEM: Final = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_SPHINX_FIELD: Final = re.compile(r"^:(param|parameter|arg|argument)\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_SPHINX_ANY: Final = re.compile(r"^:\w+")
_KNOWN_SECTIONS: Final = _GOOGLE_PARAMS | {
    "returns", "return", "yields", "yield", "raises", "raise", "examples", "example",
    "notes", "note", "see also", "warnings", "warning", "references", "todo", "other parameters",
    "methods", "warns"}


@attrs.frozen
class Docstring:
    """What a docstring says: the ``description`` (before its first section) and a
    description per parameter (or field) name."""

    description: str
    params: dict[str, str]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _joined(lines: list[str]) -> str:
    return " ".join(part.strip() for part in lines if part.strip())


def read_docstring(doc: str | None) -> Docstring:
    """Read ``doc`` (a ``__doc__``: ``None`` is an empty docstring). Example::

        read_docstring("Add.\\n\\nArgs:\\n    a: the first\\n")
        # Docstring(description='Add.', params={'a': 'the first'})
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, str] = {}
    description: list[str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        heading = _GOOGLE_HEADING.match(stripped)
        numpy = (index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1].strip())
                 and stripped.lower() in _KNOWN_SECTIONS)
        if numpy or (heading and heading.group(1).lower() in _KNOWN_SECTIONS
                     and _indent(line) == 0):
            if description is None:
                description = lines[:index]
            name = (stripped if numpy else heading.group(1) if heading else "").lower()
            start = index + (2 if numpy else 1)
            end = _section_end(lines, start, numpy=bool(numpy))
            if name in _GOOGLE_PARAMS:
                _items(lines[start:end], params, numpy=bool(numpy))
            index = end
            continue
        if _SPHINX_ANY.match(stripped):
            if description is None:
                description = lines[:index]
            index = _sphinx_field(lines, index, params)
            continue
        index += 1
    text = "\n".join(lines if description is None else description).strip()
    return Docstring(description=text, params=params)


def _section_end(lines: list[str], start: int, *, numpy: bool) -> int:
    """Where a section that starts at ``start`` ends: at the next heading of its style."""
    index = start
    while index < len(lines):
        stripped = lines[index].strip()
        if numpy:
            if (index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1].strip())
                    and stripped):
                return index
        elif stripped and _indent(lines[index]) == 0:  # a Google section's lines are indented
            return index
        index += 1
    return index


def _items(lines: list[str], params: dict[str, str], *, numpy: bool) -> None:
    """A section's items: Google's ``name (type): text``, each continued by the lines indented
    deeper than it, or NumPy's ``name : type`` lines, each described by the lines indented
    under it."""
    pattern = _NUMPY_ITEM if numpy else _GOOGLE_ITEM
    base: int | None = None
    name: str | None = None
    parts: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        depth = _indent(line)
        if base is None:
            base = depth
        item = pattern.match(line.strip()) if depth <= base else None
        if item is not None:
            if name is not None:
                params[name] = _joined(parts)
            name, parts = item.group(1), ([] if numpy else [item.group(3)])
        elif name is not None:
            parts.append(line)
    if name is not None:
        params[name] = _joined(parts)


def _sphinx_field(lines: list[str], index: int, params: dict[str, str]) -> int:
    """One ``:field ...:`` and its continuation lines; returns the index after them."""
    field = _SPHINX_FIELD.match(lines[index].strip())
    parts = [field.group(3)] if field is not None else []
    index += 1
    while index < len(lines) and lines[index].strip() and not _SPHINX_ANY.match(
            lines[index].strip()) and _indent(lines[index]) > 0:
        parts.append(lines[index])
        index += 1
    if field is not None:
        params[field.group(2)] = _joined(parts)
    return index
