"""Progress for people: what a tool reported and streamed while it ran, as ``toolledger show``,
``toolledger tail`` and the demo print it.

An update (a ``tool_progress`` record, :class:`~events.types.ToolProgress`) is shown as a head
(its message, how far as numbers, its data, and for a forwarded one the nested call it came
from) and the output it streamed (its ``content``), one line of output a line. The output
is never the model's view: the model reads the call's result alone, which the transcript
shows. A forwarded update carries the very output its source streamed, which is printed just
before it (forwarding records it at once, in the same task), so it is not printed again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from events.results import ToolResult
from events.types import Record, ToolProgress

from ..core.reducers import Projection

from ..core.visible import visible
from .console import Visible
from .render import counted, result_lines, short_json

__all__ = [
    "OUTPUT_MARK",
    "live_line",
    "progress_of",
    "progress_section",
    "render_progress",
    "streamed_lines",
    "update_head",
]

#: What marks a line of streamed output, wherever it is printed: it is the tool's, as it ran.
OUTPUT_MARK = "│ "


def streamed_lines(update: ToolProgress) -> list[str]:
    """The output ``update`` streamed, as lines: its text as the tool wrote it, split at its
    newlines; a block that is not text as one bracketed line. Empty if it streamed none."""
    if not update.content:
        return []
    return result_lines(ToolResult(content=update.content))


def update_head(update: ToolProgress, *, data: bool = True) -> str:
    """What ``update`` says besides its output, on one line: where a forwarded one came from,
    its message, how far (``2/3``, or ``2``) and (unless ``data`` is false) its data; empty
    if it says none of these."""
    parts = []
    if update.source is not None:
        parts.append(f"from {visible(update.source, newlines=False)}:")
    if update.message:
        parts.append(visible(update.message, newlines=False))
    if update.progress is not None:
        parts.append(f"({_number(update.progress)}"
                     + (f"/{_number(update.total)})" if update.total is not None else ")"))
    if data and update.data is not None:
        parts.append(short_json(update.data))
    return " ".join(parts)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def progress_of(records: Iterable[Record]) -> list[ToolProgress]:
    """The progress updates among ``records``, in their order."""
    return [record.event for record in records if isinstance(record.event, ToolProgress)]


def progress_section(projection: Projection, records: Iterable[Record]) -> list[RenderableType]:
    """What ``show`` prints after a session's call tree (``print_session(..., more=...)``):
    :func:`render_progress` of its updates, or nothing if it has none."""
    updates = progress_of(records)
    return [render_progress(projection, updates)] if updates else []


def render_progress(projection: Projection, updates: Sequence[ToolProgress]) -> RenderableType:
    """The updates of a session, in the log's order: the call (its id, and its tool's name as
    ``projection`` knows it), the update's head (:func:`update_head`) and, below it, the
    output it streamed, each line marked (:data:`OUTPUT_MARK`). A forwarded update's output
    is the one printed just before it, so it is not repeated."""
    calls = projection.calls
    title = Text("Progress", style="bold")
    title.append(f" ({counted(len(updates), 'update')}, as the tools ran: not in the "
                 f"transcript)", style="dim")
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, style="dim")
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for update in updates:
        body = Text(update_head(update), style="dim" if update.source is not None else "")
        if update.source is None:
            for line in streamed_lines(update):
                if body:
                    body.append("\n")
                body.append(OUTPUT_MARK, style="dim")
                body.append(line)
        elif update.content:
            body.append(" (its output, above)", style="dim")
        view = calls.get(update.call_id)
        table.add_row(visible(update.call_id, newlines=False),
                      visible(view.name if view is not None else "?", newlines=False), body)
    return Visible(Group(title, table))


def live_line(update: ToolProgress, name: str) -> Text:
    """``update`` as a console prints it while the session runs (the demo does): marked as
    progress, with its call's id and tool name, then its head (without its data, for
    programs) and its output's lines."""
    line = Text("  progress ", style="dim cyan")
    line.append(visible(update.call_id, newlines=False), style="dim")
    line.append(" ")
    line.append(visible(name, newlines=False), style="bold")
    head = update_head(update, data=False)
    if head:
        line.append(" " + head, style="dim")
    for text in streamed_lines(update) if update.source is None else []:
        line.append("\n    " + OUTPUT_MARK, style="dim")
        line.append(text)
    return line
