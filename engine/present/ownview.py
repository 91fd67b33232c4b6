"""A tool's own view of one call (its renderer's), run so that its failure never costs the
call's default view: a renderer that raises, returns something rich cannot print, or gives a
renderable that fails as it prints is skipped, with a one-line note in its place. ``show``
prints the view under the call's facts (:func:`own_view`); the web console shows its plain
text (:func:`own_view_text`)."""

from __future__ import annotations

import io

from rich.console import Console, ConsoleOptions, RenderResult, RenderableType
from rich.protocol import is_renderable
from rich.text import Text

from ..core.views import CallView
from .renderers import Renderers

__all__ = ["WIDTH", "own_view", "own_view_text", "renderer_failed"]

#: How wide (characters) the plain text of a tool's own view is laid out.
WIDTH = 100
#: How many characters of a failed renderer's message its note quotes.
NOTE = 72


def renderer_failed(name: str, exc: Exception) -> str:
    """The one-line note that stands for the renderer of ``name`` when it failed with ``exc``."""
    said = str(exc)
    said = said if len(said) <= NOTE else said[: NOTE - 1] + "…"
    return (f"the renderer for {name} failed ({type(exc).__name__}: {said}); "
            "this is the default view")


class _OwnView:
    """A tool's own view, rendered when it is printed: if that fails, a note says so (and
    :attr:`failed` keeps it)."""

    def __init__(self, name: str, renderable: RenderableType) -> None:
        self.name = name
        self.renderable = renderable
        self.failed: str | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        try:
            lines = console.render_lines(self.renderable, options, pad=False, new_lines=True)
        except Exception as exc:
            self.failed = renderer_failed(self.name, exc)
            yield Text(self.failed, style="dim")
            return
        for line in lines:
            yield from line


def own_view(view: CallView, renderers: Renderers) -> RenderableType | str | None:
    """The view ``renderers`` has for ``view``'s tool, ready to print (a renderable that
    prints a note instead if it fails as it prints); the note, a ``str``, if the renderer
    raised or returned what rich cannot print; ``None`` if the tool has no renderer."""
    renderer = renderers.get(view.name)
    if renderer is None:
        return None
    try:
        own = renderer(view)
        if not is_renderable(own):
            raise TypeError(f"it returned a {type(own).__name__}, not a rich renderable")
    except Exception as exc:  # the tool's own view is a nicety: never lose the default
        return renderer_failed(view.name, exc)
    return _OwnView(view.name, own)


def own_view_text(view: CallView, renderers: Renderers, width: int = WIDTH
                  ) -> tuple[str, bool] | None:
    """The plain text of :func:`own_view`, laid out ``width`` characters wide, and whether it
    is the note of a renderer that failed; ``None`` if the tool has no renderer."""
    own = own_view(view, renderers)
    if own is None or isinstance(own, str):
        return None if own is None else (own, True)
    console = Console(file=io.StringIO(), record=True, width=width, color_system=None,
                      force_terminal=False, highlight=False)
    console.print(own)
    printed = "\n".join(line.rstrip() for line in console.export_text().rstrip("\n").split("\n"))
    failed = own.failed if isinstance(own, _OwnView) else None
    return (failed, True) if failed is not None else (printed, False)
