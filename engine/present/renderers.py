"""A tool's own view of its calls in the call tree, by tool name.

A console that prints sessions (``toolledger show``, ``toolledger demo``, a host's own) owns a
:class:`Renderers`: the views it shows calls with, loaded from the entry points packages declare
and from the modules it is given. A module registers its views with :func:`register_renderer`,
which adds to the renderers loading it (:meth:`Renderers.load`); called elsewhere, it adds to
the renderers of the current context (:func:`current`), which the printing functions use when
given none. Nothing here is shared by the whole process. Pure: no I/O but the imports asked
for.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from importlib import import_module
from importlib.metadata import entry_points

from rich.console import RenderableType

from ..core.views import CallView

__all__ = ["ENTRY_POINT_GROUP", "Renderer", "Renderers", "current", "register_renderer"]

#: A tool's own view of its calls in the call tree: ``(call) -> a rich renderable``.
Renderer = Callable[[CallView], RenderableType]

#: The entry-point group a package declares its tools' renderers in (name = the tool's name).
ENTRY_POINT_GROUP = "toolledger.renderers"


class Renderers:
    """The renderers one console shows calls with, by tool name."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str, Renderer] = {}

    def __len__(self) -> int:
        return len(self._by_name)

    def register(self, tool_name: str, renderer: Renderer) -> Renderer:
        """Show calls of ``tool_name`` with ``renderer`` (below the default facts). A renderer
        that raises, returns something rich cannot print, or gives a renderable that fails as
        it prints is skipped, with a one-line note in its place."""
        self._by_name[tool_name] = renderer
        return renderer

    def get(self, tool_name: str) -> Renderer | None:
        """The renderer of ``tool_name``, if one is registered."""
        return self._by_name.get(tool_name)

    def load(self, modules: tuple[str, ...] = ()) -> None:
        """Register the renderers packages declare (entry points in the
        ``toolledger.renderers`` group), then import ``modules``: what they register with
        :func:`register_renderer` as they are imported comes here."""
        for point in entry_points(group=ENTRY_POINT_GROUP):
            self.register(point.name, point.load())
        token = _CURRENT.set(self)
        try:
            for module in modules:
                import_module(module)
        finally:
            _CURRENT.reset(token)


_CURRENT: ContextVar[Renderers | None] = ContextVar("toolledger_renderers", default=None)


def current() -> Renderers:
    """The renderers of the current context: the ones loading, or else the context's own
    (made empty the first time it is asked for)."""
    renderers = _CURRENT.get()
    if renderers is None:
        renderers = Renderers()
        _CURRENT.set(renderers)
    return renderers


def register_renderer(tool_name: str, renderer: Renderer) -> Renderer:
    """Show calls of ``tool_name`` with ``renderer`` in ``show`` and the demo: adds it to
    :func:`current` renderers (see the module's docstring and :meth:`Renderers.register`)."""
    return current().register(tool_name, renderer)
