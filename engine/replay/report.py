"""What a re-drive found: :class:`ReplayReport`, as data, as JSON and for people to read.

The readable form is a rich renderable (``console.print(report)``): colours in a terminal,
plain text in a pipe; ``toolledger replay`` prints it with ``soft_wrap=True``, so that each
line stays one line whatever the width (and a pipe can grep it). Text that comes from the log
is never read as rich markup, nor obeyed by the terminal (it prints through
:class:`~engine.present.console.Visible`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
from rich.console import Group, RenderableType
from rich.text import Text

from events.types import Record

from ..core.visible import visible
from ..present.console import Visible
from .compare import Divergence, short_json

__all__ = ["ReplayReport", "ToolMode", "render_report"]

ToolMode = Literal["recorded", "live"]

#: How many characters of a recorded or replayed value the readable report shows.
VALUE_WIDTH = 160


@attrs.frozen(kw_only=True)
class ReplayReport:
    """What re-driving one session found: every divergence, first per call.

    ``ok`` is true when nothing diverged. ``verified`` says whether the records replayed were
    verified with the log's key (see :mod:`engine.replay.trust`; if not, a note says so too).
    ``to_json()`` gives the report as a JSON object;
    ``console.print(report)`` prints it for people. ``replayed`` holds the replay's own log
    (for a closer look; not part of the JSON).
    """

    session_id: str
    tool_mode: ToolMode
    verified: bool = False
    divergences: tuple[Divergence, ...] = ()
    notes: tuple[str, ...] = ()
    records: int = 0
    calls: int = 0
    transcript_entries: int = 0
    replayed: tuple[Record, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the replay matched the log: no divergence at all."""
        return not self.divergences

    def by_scope(self, scope: str) -> tuple[Divergence, ...]:
        """The divergences about calls, transcript entries, tools or the session."""
        return tuple(d for d in self.divergences if d.scope == scope)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (``json.dumps(report.to_json())``)."""
        return {
            "session_id": self.session_id,
            "tools": self.tool_mode,
            "verified": self.verified,
            "ok": self.ok,
            "records": self.records,
            "calls": self.calls,
            "transcript_entries": self.transcript_entries,
            "divergences": [d.to_json() for d in self.divergences],
            "notes": list(self.notes),
        }

    def __rich__(self) -> RenderableType:
        return render_report(self)


def _value(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"type", "data"}:
        return f"{value['type']} {short_json(value['data'], VALUE_WIDTH)}"
    return short_json(value, VALUE_WIDTH)


def _headline(report: ReplayReport) -> Text:
    session = visible(report.session_id, newlines=False)
    title = Text.assemble(("Session ", "bold"), (session, "bold"),
                          f" (re-driven with {report.tool_mode} tools): ")
    if report.ok:
        title.append(f"no divergence in {report.calls} calls and "
                     f"{report.transcript_entries} transcript entries", style="green")
        return title
    parts = []
    if calls := report.by_scope("call"):
        parts.append(f"{len(calls)} of {report.calls} calls diverge")
    if entries := report.by_scope("transcript"):
        parts.append(f"{len(entries)} transcript "
                     f"{'entry differs' if len(entries) == 1 else 'entries differ'}")
    if tools := report.by_scope("tool"):
        parts.append(f"{len(tools)} tool{'' if len(tools) == 1 else 's'} changed")
    if report.by_scope("session"):
        parts.append("the replay did not go as far as the log")
    title.append(", ".join(parts), style="red")
    return title


def _where(d: Divergence) -> Text:
    what = {"call": "call ", "transcript": "transcript ", "tool": "tool ", "session": "replay "}
    text = Text.assemble((what[d.scope], "bold"), (visible(d.subject, newlines=False), "bold cyan"))
    if d.scope == "call":
        if d.tool:
            text.append(f" ({visible(d.tool, newlines=False)})")
        if d.index is not None:
            text.append(f", event {d.index}")
            if d.event:
                text.append(f" {d.event}", style="bold")
    elif d.scope == "transcript" and d.index is not None:
        text.append(f" (entry {d.index})")
    elif d.scope == "tool" and d.index is not None:
        text.append(f" (registration {d.index + 1})")
    return text


_EXPLAINED = {
    "event": "the replay has a different event here",
    "missing": "only the log has this",
    "extra": "only the replay has this",
    "only_recorded": "only the log has this call: the replay never made it",
    "only_replayed": "only the replay has this call: the log never made it",
    "not_given": "not among the tools given: replayed from its recorded declaration",
}


def _what(d: Divergence) -> list[Text]:
    if d.kind == "error":
        return [Text(f"  {d.now}")]
    lines = []
    if d.kind == "changed":
        lines.append(Text.assemble(("  field ", "dim"), (d.field or "(the whole value)", "bold")))
    else:
        lines.append(Text(f"  {_EXPLAINED[d.kind]}"))
    if d.kind == "not_given":
        return lines
    absent = Text("(nothing)", style="dim")
    lines.append(Text.assemble(("    recorded: ", "dim"),
                               (_value(d.recorded), "yellow") if d.kind not in (
                                   "extra", "only_replayed") else absent))
    lines.append(Text.assemble(("    now:      ", "dim"),
                               (_value(d.now), "magenta") if d.kind not in (
                                   "missing", "only_recorded") else absent))
    return lines


def render_report(report: ReplayReport) -> RenderableType:
    """The report for people: a headline, then each divergence with what was and what is."""
    lines: list[RenderableType] = [_headline(report)]
    for d in report.divergences:
        lines.append(_where(d))
        lines.extend(_what(d))
    for note in report.notes:
        lines.append(Text(f"note: {note}", style="dim"))
    return Visible(Group(*lines))
