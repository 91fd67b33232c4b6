"""The terminal asker: a person answers a tool's question at the keyboard, one field at a time.

:func:`terminal_asker` shows the question (the tool, the call, the message, as visible escapes:
what a model or a log put there cannot clear the screen or add a line), asks whether to answer,
decline or cancel, and then reads each field of the form in turn: its title, its kind, its
bounds, its choices numbered, its default. A value that does not fit the field is asked again,
saying why; ``!decline`` or ``!cancel`` at any field ends the form so. What it returns always
fits the form (:func:`engine.core.forms.content_problem`). Lines are read in a worker thread, so
the session's loop keeps going.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ..core.forms import choices, content_problem, field_kind, field_problem
from ..core.questions import Answer, Question
from ..core.visible import visible

__all__ = ["field_notes", "terminal_asker"]

_YES = ("y", "yes", "true", "t", "1")
_NO = ("n", "no", "false", "f", "0")


class _Ended(Exception):
    """The person typed ``!decline`` or ``!cancel`` at a field."""

    def __init__(self, action: str) -> None:
        self.action = action


def terminal_asker(
    ask: Callable[[str], str] | None = None,
) -> Callable[[Question], Awaitable[Answer]]:
    """An asker that puts each question to a person at the terminal, as a form (see the
    module's docstring). ``ask`` reads a line after showing its prompt (default ``input``, in
    a worker thread)."""
    read = ask or input

    async def line(prompt: str) -> str:
        answer = await trio.to_thread.run_sync(read, prompt, abandon_on_cancel=True)
        return str(answer).strip()

    async def asker(question: Question) -> Answer:
        name, call_id = (visible(t, newlines=False) for t in (question.name, question.call_id))
        head = (f"\n{name} (call {call_id}) asks: {visible(question.message, newlines=False)}\n"
                "  [a]nswer / [d]ecline / [c]ancel: ")
        while True:
            choice = (await line(head)).lower()
            if choice in ("d", "decline"):
                return Answer(action="decline", reason="declined at the terminal")
            if choice in ("c", "cancel"):
                return Answer(action="cancel", reason="cancelled at the terminal")
            if choice in ("a", "answer", ""):
                break
        try:
            content = await _fill(question.schema, line)
        except _Ended as ended:
            if ended.action == "decline":
                return Answer(action="decline", reason="declined at the terminal")
            return Answer(action="cancel", reason="cancelled at the terminal")
        assert content_problem(question.schema, content) is None
        return Answer(action="accept", content=content)

    return asker


async def _fill(schema: Mapping[str, Any],
                line: Callable[[str], Awaitable[str]]) -> dict[str, Any]:
    """Each field of the form, read in turn and checked."""
    required = set(schema.get("required", ()))
    content: dict[str, Any] = {}
    for name, field in schema["properties"].items():
        prompt = _prompt(name, field, name in required)
        problem = ""
        while True:
            typed = await line(f"{problem}{prompt}")
            if typed in ("!decline", "!cancel"):
                raise _Ended(typed[1:])
            if typed == "":
                if "default" in field:
                    content[name] = field["default"]
                    break
                if name not in required:
                    break
                problem = "  (required)\n"
                continue
            value, wrong = _parsed(field, typed)
            if wrong is None:
                wrong = field_problem(field, value)
            if wrong is None:
                content[name] = value
                break
            problem = f"  {visible(typed, newlines=False)} {wrong}\n"
    return content


def field_notes(field: Mapping[str, Any], required: bool) -> list[str]:
    """What a person needs to know to fill a form's field, in a few words each: its kind
    (and format), whether it is required, its bounds and its default (``["integer",
    "required", "min 1"]``). As visible escapes: a form comes from a tool."""
    kind = field_kind(field)
    notes = [kind if "format" not in field else f"{kind}, {field['format']}"]
    if required:
        notes.append("required")
    for key, word in (("minimum", "min"), ("maximum", "max"), ("minLength", "min length"),
                      ("maxLength", "max length"), ("minItems", "at least"),
                      ("maxItems", "at most")):
        if key in field:
            notes.append(f"{word} {field[key]}")
    if "default" in field:
        notes.append(f"default {visible(repr(field['default']), newlines=False)}")
    return notes


def _prompt(name: str, field: Mapping[str, Any], required: bool) -> str:
    kind = field_kind(field)
    title = visible(str(field.get("title") or name), newlines=False)
    text = f"  {title} ({', '.join(field_notes(field, required))})"
    if "description" in field:
        text += f"\n    {visible(str(field['description']), newlines=False)}"
    if kind in ("enum", "multi"):
        listed = "; ".join(f"{n}) {visible(label, newlines=False)}"
                           for n, (_, label) in enumerate(choices(field), start=1))
        text += f"\n    {listed}" + (" (several: 1,3)" if kind == "multi" else "")
    return text + ": "


def _parsed(field: Mapping[str, Any], typed: str) -> tuple[Any, str | None]:
    """The typed text as the field's kind of value, or why it is not one."""
    kind = field_kind(field)
    if kind == "boolean":
        low = typed.lower()
        if low in _YES or low in _NO:
            return low in _YES, None
        return None, "is not yes or no"
    if kind in ("number", "integer"):
        try:
            return (int(typed) if kind == "integer" else float(typed)), None
        except ValueError:
            return None, f"is not {'an integer' if kind == 'integer' else 'a number'}"
    if kind == "enum":
        return _choice(field, typed)
    if kind == "multi":
        picked = []
        for part in (p.strip() for p in typed.split(",")):
            value, wrong = _choice(field, part)
            if wrong is not None:
                return None, wrong
            picked.append(value)
        return picked, None
    return typed, None


def _choice(field: Mapping[str, Any], typed: str) -> tuple[Any, str | None]:
    options = choices(field)
    if typed.isdigit() and 1 <= int(typed) <= len(options):
        return options[int(typed) - 1][0], None
    for value, label in options:
        if typed in (value, label):
            return value, None
    return None, f"is not one of the choices (1 to {len(options)})"
