"""A session for people to read: the transcript and the call tree, as rich renderables.

``toolledger demo`` and ``toolledger show`` both print through :func:`print_session`, so a log
read back from disk looks exactly like the live session that wrote it. Everything is derived
from a :class:`~engine.core.reducers.Projection`; nothing here reads a file or a clock.

Text that comes from the log (arguments, results, reasons) is never parsed as rich markup: a
result containing ``[red]`` prints as those characters. Nor is it obeyed by the terminal: what
these functions return prints through :class:`~engine.present.console.Visible`, so a control sequence
or a bidi override in a tool's output shows as its escape (``\x1b]52;…``, ``\u202e``) on any
console (see :mod:`engine.core.visible`). On a console that is not a terminal rich writes plain
text, which is what tests and pipes get.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    KeptResult,
    ResourceLink,
    TextContent,
    ToolResult,
)
from events.types import (
    Annotations,
    AssistantMessage,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolSource,
    UserMessage,
)

from ..core.lifecycle import CallStage
from ..core.reducers import CallView, Projection, ToolResultEntry
from ..core.refusals import APPROVER_REFUSED
from ..core.visible import visible
from .console import Visible
from .ownview import own_view
from .renderers import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from .renderers import Renderer, Renderers, current, register_renderer

__all__ = [
    "Renderer",
    "Renderers",
    "call_label",
    "counted",
    "load_renderers",
    "register_renderer",
    "print_session",
    "render_calls",
    "render_session",
    "render_transcript",
    "result_lines",
]

#: How many lines of a tool result the transcript shows before it says how many it left out.
TRANSCRIPT_RESULT_LINES = 12
#: How many characters of arguments or a result's first line the call tree shows.
SHORT = 72
#: How many characters of a call's arguments the call tree shows.
ARGS = 60

_STATUS_STYLE = {
    "completed": "green",
    "failed": "red",
    "blocked": "yellow",
    "denied": "yellow",
    "cancelled": "magenta",
}
_KEY_WIDTH = 9


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: ``"1 session"``, ``"3 sessions"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def load_renderers(modules: tuple[str, ...] = ()) -> None:
    """:meth:`Renderers.load` into the :func:`~engine.present.renderers.current` renderers;
    a console that owns its own loads them with ``Renderers().load(modules)``."""
    current().load(modules)


def _clip(value: str, limit: int = SHORT) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def short_json(value: Any, limit: int = SHORT) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters."""
    try:
        dumped = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        dumped = repr(value)
    return _clip(dumped, limit)


def result_lines(result: ToolResult) -> list[str]:
    """The result's content as lines of text; non-text blocks as one bracketed line each."""
    lines: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            lines.extend(block.text.splitlines() or [""])
        elif isinstance(block, (ImageContent, AudioContent)):
            lines.append(f"[{block.type} {block.mime_type}, {len(block.data)} base64 chars]")
        elif isinstance(block, ResourceLink):
            lines.append(f"[link {block.uri}]")
        elif isinstance(block, EmbeddedResource):
            lines.append(f"[resource {block.resource.get('uri', '?')}]")
    if not lines and result.structured_content is not None:
        lines.append(short_json(result.structured_content))
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def short_result(result: ToolResult, limit: int = SHORT) -> str:
    """The result's first non-empty line, cut to ``limit``, saying how many lines follow."""
    lines = result_lines(result)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return "(empty)"
    shown = _clip(lines[first].strip(), limit)
    rest = len(lines) - first - 1
    return f"{shown}  (+{rest} more line{'s' if rest != 1 else ''})" if rest else shown


# -- the transcript ------------------------------------------------------------------------


def render_transcript(projection: Projection) -> RenderableType:
    """What the model saw: user and assistant messages, one result per top-level call."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for entry in projection.transcript:
        if isinstance(entry, UserMessage):
            table.add_row(Text("user", style="bold cyan"), Text(entry.text))
        elif isinstance(entry, AssistantMessage):
            table.add_row(Text("assistant", style="bold magenta"), _assistant(entry))
        elif isinstance(entry, ToolResultEntry):
            call = projection.calls.get(entry.call_id)
            terminal = call.terminal if call is not None else None
            kept = terminal.kept if isinstance(terminal, ToolCallCompleted) else None
            table.add_row(Text("tool", style="bold blue"), _tool_result(entry, kept))
    if not table.rows:
        return Text("(empty transcript)", style="dim")
    return Visible(table)


def _assistant(message: AssistantMessage) -> Text:
    body = Text()
    if message.text:
        body.append(message.text)
    for index, call in enumerate(message.tool_calls):
        if body:
            body.append("\n")
        body.append("→ ", style="dim")
        body.append(f"{message.turn}.{index} ", style="dim")
        body.append(visible(call.name, newlines=False), style="bold")
        if call.model_name is not None:  # the name the tool had at the provider
            body.append(f" (as {visible(call.model_name, newlines=False)})", style="dim")
        body.append(" " + short_json(call.arguments))
    if message.stop_reason != "stop":
        body.append(f"\n(stop reason: {message.stop_reason})", style="dim")
    return body


def _tool_result(entry: ToolResultEntry, kept: KeptResult | None = None) -> Text:
    body = Text()
    body.append(f"{visible(entry.call_id, newlines=False)} ", style="dim")
    body.append(visible(entry.name, newlines=False), style="bold")
    if entry.result.is_error:
        body.append("  error", style="red")
    lines = result_lines(entry.result)
    for line in lines[:TRANSCRIPT_RESULT_LINES]:
        body.append("\n" + line)
    if len(lines) > TRANSCRIPT_RESULT_LINES:
        left = len(lines) - TRANSCRIPT_RESULT_LINES
        body.append(f"\n… ({left} more line{'s' if left != 1 else ''})", style="dim")
    if kept is not None:  # what the model read is a cut: say where the whole is
        where = ("in the log" if kept.whole is not None
                 else f"in the store, as the artifact {kept.sha256[:16]}…")
        body.append(f"\n(the model read a cut of this result; the whole, {kept.size} bytes, is "
                    f"kept {where}: `toolledger show LOG --output "
                    f"{visible(entry.call_id, newlines=False)}` prints it)", style="dim")
    return body


# -- the call tree -------------------------------------------------------------------------


def render_calls(projection: Projection, renderers: Renderers | None = None) -> RenderableType:
    """Every call: the model's in order, each nested call under the call that made it, shown
    with ``renderers`` (the :func:`~engine.present.renderers.current` ones if ``None``)."""
    calls = projection.calls
    counts = Counter(view.status for view in calls.values())
    summary = ", ".join(f"{n} {status}" for status, n in counts.items())
    title = Text("Calls", style="bold")
    title.append(f" ({len(calls)}{': ' + summary if summary else ''})", style="dim")
    tree = Tree(title, guide_style="dim")
    roots = projection.roots()
    if not roots:
        tree.add(Text("no tool calls", style="dim"))
    for view in roots:
        _add_call(tree, projection, view, current() if renderers is None else renderers)
    return Visible(tree)


def _add_call(parent: Tree, projection: Projection, view: CallView,
              renderers: Renderers) -> None:
    node = parent.add(call_label(view, projection.source(view.call_id), renderers))
    for child_id in projection.children(view.call_id):
        _add_call(node, projection, projection.calls[child_id], renderers)


def call_label(view: CallView, source: ToolSource | None = None,
               renderers: Renderers | None = None) -> RenderableType:
    """One node of the call tree: id, name and status, then one line per fact about it
    (a long fact wraps under its own column, not under the key). ``source`` is the MCP server
    that answered a mounted tool's call (:meth:`Projection.source`): its name and version,
    and its hints, marked trusted when the host mounted it with ``trust_hints=True``. The
    tool's own view, if ``renderers`` (the :func:`~engine.present.renderers.current` ones if
    ``None``) has one, follows."""
    label = Text()
    label.append(visible(view.call_id, newlines=False), style="dim")
    label.append("  ")
    label.append(visible(view.name, newlines=False), style="bold")
    label.append("  ")
    status = view.status
    if view.terminal is None:
        label.append(f"open ({status})", style="bold cyan")
    else:
        label.append(status, style=f"bold {_STATUS_STYLE.get(status, '')}")
        if isinstance(view.terminal, ToolCallCompleted) and view.terminal.result.is_error:
            label.append(" with an error result", style="red")

    facts = Table.grid(padding=(0, 1))
    facts.add_column(no_wrap=True, style="dim", min_width=_KEY_WIDTH - 1)
    facts.add_column(overflow="fold")

    def fact(key: str, value: str, style: str = "") -> None:
        facts.add_row(key, Text(value, style=style))

    if view.origin == "host":
        fact("caller", "the host (session.call_tool): not in the transcript")
    if source is not None:
        for key, value, style in _server_facts(source):
            fact(key, value, style)
    fact("args", short_json(view.requested_arguments, ARGS))
    for rewrite in view.rewrites:
        fact("rewrite", f"by {rewrite.by}: {short_json(rewrite.arguments)}", "yellow")
    if view.policy is not None:
        fact("policy", f"{view.policy.decision}: {view.policy.reason}")
    terminal = view.terminal
    if view.approval is not None:
        granted = view.approval.granted
        scope = "for the session" if view.approval.scope == "session" else "once"
        why = view.approval.reason
        if not granted and isinstance(terminal, ToolCallDenied) and terminal.by == "approver":
            # the denial says nothing more (fold its reason in here), unless it is only that
            # the approver refused, which "denied ..., by the approver" says already
            why = why or (terminal.reason if terminal.reason != APPROVER_REFUSED else None)
        fact("approval",
             f"asked → {'granted' if granted else 'denied'} {scope}, by the approver"
             + (f": {why}" if why else ""),
             "green" if granted else "yellow")
    elif view.stage is CallStage.AWAITING:
        fact("approval", "asked → waiting for the approver", "cyan")
    for asked in view.questions:  # what the tool asked the person, and the answer
        answer = asked.answer
        said = "waiting for an answer" if answer is None else {
            "accept": "accepted", "decline": "declined", "cancel": "cancelled"}[answer.action]
        if answer is not None and answer.content is not None:
            said += f" {short_json(answer.content)}"
        elif answer is not None and answer.reason:
            said += f": {answer.reason}"
        fact("question", f"{asked.asked.message} → {said}", "cyan" if answer is None else "")
    if view.progress_count:
        last = view.last_progress
        message = last.message if last is not None and last.message else ""
        fact("progress", f"{view.progress_count} update(s){': ' + message if message else ''}")
    if isinstance(terminal, ToolCallBlocked):
        fact("blocked", f"by {terminal.by}: {terminal.reason}", "yellow")
    elif isinstance(terminal, ToolCallDenied) and (
        terminal.by != "approver" or view.approval is None  # else the approval line says it
    ):
        fact("denied", f"by the {terminal.by}: {terminal.reason}", "yellow")
    elif isinstance(terminal, ToolCallFailed):
        fact("error", f"{terminal.kind}: {_clip(terminal.message)}", "red")
    elif isinstance(terminal, ToolCallCancelled):
        fact("cancelled", terminal.reason, "magenta")
    if terminal is not None:
        fact("result", short_result(terminal.result), "red" if terminal.result.is_error else "")
    own = own_view(view, current() if renderers is None else renderers)
    if isinstance(own, str):
        fact("note", own, "dim")
    elif own is not None:
        return Visible(Group(label, facts, own))
    return Visible(Group(label, facts))


def _server_facts(source: ToolSource) -> list[tuple[str, str, str]]:
    """What a call of a mounted tool shows of its server: who answered, and what it said
    its tool does (``hints`` is left out of a log written before hints were recorded)."""
    said = f"{source.server} {source.version}" if source.version else source.server
    facts = [("server", f"{visible(said, newlines=False)}, its tool "
                        f"{visible(source.tool, newlines=False)}", "")]
    if source.hints is not None:
        if source.hints_trusted:
            facts.append(("hints", f"trusted (trust_hints=True): {_hints(source.hints)}",
                          "bold yellow"))
        else:
            facts.append(("hints", f"the server's, not trusted: {_hints(source.hints)}", "dim"))
    return facts


def _hints(hints: Annotations) -> str:
    """The hints that are set, as the log names them (``read_only=true, ...``)."""
    named = {"read_only": hints.read_only, "destructive": hints.destructive,
             "idempotent": hints.idempotent, "open_world": hints.open_world}
    return ", ".join(f"{name}={'true' if value else 'false'}"
                     for name, value in named.items() if value is not None) or "none declared"


# -- a whole session -----------------------------------------------------------------------


def render_session(projection: Projection, renderers: Renderers | None = None,
                   more: Sequence[RenderableType] = ()) -> RenderableType:
    """The session's header, transcript and call tree, one after another (the calls shown
    with ``renderers``: see :func:`render_calls`), then ``more``, each after a blank line
    (``show`` adds what the tools reported as they ran:
    :func:`engine.present.progress.render_progress`)."""
    header = Text("Session ", style="bold")
    header.append(visible(projection.session_id or "(empty)", newlines=False), style="bold")
    header.append(f"  ·  {counted(projection.last_seq, 'record')}  ·  "
                  f"{counted(projection.turn, 'turn')}", style="dim")
    if projection.open_calls:
        header.append(f"  ·  {len(projection.open_calls)} open calls", style="bold cyan")
    usage = projection.usage
    if usage.input_tokens or usage.output_tokens:
        header.append(f"  ·  tokens: {usage.input_tokens} in ({usage.cached_tokens} cached), "
                      f"{usage.output_tokens} out", style="dim")
    return Visible(Group(
        header,
        Text(""),
        Text("Transcript", style="bold"),
        render_transcript(projection),
        Text(""),
        render_calls(projection, renderers),
        *(part for renderable in more for part in (Text(""), renderable)),
    ))


def print_session(projection: Projection, console: Console,
                  renderers: Renderers | None = None,
                  more: Sequence[RenderableType] = ()) -> None:
    """Print the session as ``toolledger demo`` and ``toolledger show`` do, each call shown
    with ``renderers`` (see :func:`render_calls`), then ``more`` (:func:`render_session`)."""
    renderable = render_session(projection, renderers, more)
    if console.is_terminal:
        console.print(renderable)
        return
    # Plain text for a pipe or a file: rich pads table cells to their column's width, which
    # leaves trailing spaces that nobody wants in a saved or diffed output.
    with console.capture() as capture:
        console.print(renderable)
    console.file.write("\n".join(line.rstrip() for line in capture.get().split("\n")))
