"""rich's side of :func:`engine.core.visible.visible`: a console that prints no control sequence
it did not make itself.

rich strips a few control characters from text (``BEL``, ``BS``, ``VT``, ``FF``, ``CR``) and
passes the rest, ``ESC`` and the C1 controls among them, to the terminal. A
:class:`VisibleConsole` makes every piece of text it renders visible first, before layout (so
that columns are measured on what will show): each :class:`~rich.text.Text` and string as it
reaches :meth:`~rich.console.Console.render`, with its styles moved along with the characters
they cover; and, as a last net, the text of any segment a renderable made some other way.
Its own colours are styles, not text, so they still reach the terminal.

The ``toolledger`` command prints through one. :class:`Visible` wraps a renderable so that it
prints the same way on any console: :func:`engine.present.render.print_session` and the replay report
use it, since a host may print them with a console of its own.
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from rich.console import (
    Console,
    ConsoleOptions,
    HighlighterType,
    JustifyMethod,
    OverflowMethod,
    RenderResult,
    RenderableType,
)
from rich.measure import Measurement
from rich.protocol import rich_cast
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text

from ..core.visible import HIDDEN, visible

__all__ = ["Visible", "VisibleConsole", "visible_text"]


def visible_text(text: Text) -> Text:
    """``text`` with :func:`~engine.core.visible.visible` applied, each span still over the
    characters it styled (the same object when there is nothing to escape)."""
    plain = text.plain
    if not HIDDEN.search(plain):
        return text
    parts: list[str] = []
    offsets: list[int] = []  # where each old character starts in the new text
    position = 0
    for char in plain:
        offsets.append(position)
        part = visible(char)
        parts.append(part)
        position += len(part)
    offsets.append(position)
    last = len(plain)
    spans = [Span(offsets[min(span.start, last)], offsets[min(span.end, last)], span.style)
             for span in text.spans]
    return Text("".join(parts), style=text.style, justify=text.justify, overflow=text.overflow,
                no_wrap=text.no_wrap, end=text.end, tab_size=text.tab_size, spans=spans)


class VisibleConsole(Console):
    """A rich console whose output shows the text it is given and never obeys it."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        renderable = rich_cast(renderable)
        if isinstance(renderable, Text):
            renderable = visible_text(renderable)
        for segment in super().render(renderable, options):
            if segment.control is None and HIDDEN.search(segment.text):
                segment = Segment(visible(segment.text), segment.style)
            yield segment

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        return visible_text(super().render_str(
            text, style=style, justify=justify, overflow=overflow, emoji=emoji, markup=markup,
            highlight=highlight, highlighter=highlighter))


class Visible:
    """``renderable``, printed as a :class:`VisibleConsole` would print it on any console."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if isinstance(console, VisibleConsole):
            yield self.renderable
            return
        # Lay it out on a visible console with the same options; the segments it makes are
        # then written by the caller's console, in its colours, to its file.
        shadow = VisibleConsole(file=io.StringIO(), width=options.max_width,
                                force_terminal=console.is_terminal, highlight=False,
                                legacy_windows=console.legacy_windows)
        yield from shadow.render(self.renderable, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)
