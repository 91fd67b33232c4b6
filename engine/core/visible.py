"""Text a terminal shows and does not obey: :func:`visible`, and :func:`visible_json`.

A log is input, and so is everything in it: a tool's output, the model's arguments, ids, file
names, the text of an exception. Printed raw, such text can drive the terminal that shows it:
``ESC ] 52`` sets the clipboard, ``ESC ] 0`` the window title, ``ESC ] 8`` hides a link behind
a word, ``ESC [ 2J`` clears the screen, and ``ESC [ 2K ESC [ 1G`` erases the line just
printed (a ``BROKEN`` report) so that the text after it can print one of its own. The C1
controls (``U+009B`` is ``CSI`` by itself) do the same without an ``ESC``. Bidi overrides and
isolates (``U+202A``-``U+202E``, ``U+2066``-``U+2069``) reorder what follows them; zero-width
and tag characters hide text; a lone surrogate (which ``os.fsdecode`` makes of a non-UTF-8
file name) cannot be written to a UTF-8 terminal at all.

:func:`visible` writes each such character as the escape Python would (``\\x1b``, ``\\x9b``,
``\\u202e``, ``\\udcff``, ``\\U000e0041``): every control character (C0, ``DEL``, C1) except
newline and tab, every format character (Unicode category ``Cf``), the surrogates and the line
and paragraph separators. Everything else, including any language's letters and emoji, is
kept. A backslash is kept as it is: the escapes are for reading, and cannot be told from the
same characters typed out (``\\x1b`` in a log shows the same either way).

Each output path applies it at one seam: the command line prints through
:class:`engine.present.console.VisibleConsole` (and :func:`engine.present.render.print_session` through
:class:`engine.present.console.Visible`, whatever console it is given), ``--json`` through
:func:`visible_json`, error lines through the command line's one error printer, and the
terminal approver builds its question with it. Nothing here knows about rich: it is plain text.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["HIDDEN", "visible", "visible_json"]

#: The characters a terminal may act on, or that change how the text around them shows:
#: Unicode's Cc (less newline and tab), Cf, Cs, Zl and Zp. A table, checked against
#: ``unicodedata`` by the tests (a newer Unicode's additions are listed ahead of time).
HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
_HIDDEN_OR_BREAK = re.compile(f"{HIDDEN.pattern[:-1]}\n\t]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with every character a terminal would obey or hide written as an escape.

    Newlines and tabs are kept for layout unless ``newlines=False`` (for a value that must stay
    on one line: an id, a file name, a field of a prompt).

    >>> visible("ok\\x1b[2J\\u202egnp.exe")
    'ok\\\\x1b[2J\\\\u202egnp.exe'
    >>> visible("two\\nlines", newlines=False)
    'two\\\\nlines'
    """
    return (HIDDEN if newlines else _HIDDEN_OR_BREAK).sub(_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON that reads well (any language's text as it is) and that a terminal
    shows without obeying: the characters :func:`visible` escapes become ``\\u`` escapes,
    which decode to the very same value.

    >>> visible_json({"name": "café\\u202e"})
    '{"name": "café\\\\u202e"}'
    """
    # Outside strings JSON has only ASCII punctuation, digits and spaces, so every match is
    # inside a string, where a \\u escape means the same character.
    return HIDDEN.sub(_json_escape, json.dumps(value, ensure_ascii=False, indent=indent))
