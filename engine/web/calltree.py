"""The call tree as HTML: each call with its arguments, the policy's decision and reason, the
approval and who gave it, progress, questions, result and timings; nested calls inside their
parent. JSON values show as a tree of ``<details>`` that opens without JavaScript."""

from __future__ import annotations

import difflib
import json
from typing import Any

from events.callevents import ToolCallCompleted, ToolCallFailed
from events.types import ToolCallDenied

from ..core.views import CallView
from ..present.ownview import own_view_text
from ..present.render import result_lines
from ..present.renderers import Renderers
from .markup import Safe, join, tag
from .state import Folded

__all__ = ["call_tree", "json_tree", "arguments_diff", "ROOTS_PER_PAGE"]

#: How many top-level calls one page of the tree shows (the rest are a page away).
ROOTS_PER_PAGE = 100
#: How many nodes of one JSON value a page shows.
JSON_NODES = 400
#: How deep nested calls are drawn inside their parents on one page.
DEPTH = 12


def json_tree(value: Any, budget: list[int] | None = None, key: str | None = None) -> Safe:
    """``value`` as nested ``<details>``: objects and arrays fold, scalars show as JSON."""
    budget = [JSON_NODES] if budget is None else budget
    label = None if key is None else tag("span", {"class": "key"}, key, ": ")
    budget[0] -= 1
    if budget[0] < 0:
        return tag("div", {"class": "more"}, label, "…")
    if isinstance(value, (dict, list)) and value:
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        kind = f"{{{len(items)}}}" if isinstance(value, dict) else f"[{len(items)}]"
        inner: list[Safe] = []
        for name, item in items:
            if budget[0] <= 0:
                inner.append(tag("div", {"class": "more"}, f"… {len(items) - len(inner)} more"))
                break
            inner.append(json_tree(item, budget, str(name)))
        return tag("details", {"class": "json", "open": len(items) <= 8}, tag(
            "summary", None, label, kind), tag("div", {"class": "members"}, inner))
    return tag("div", {"class": "scalar"}, label,
               tag("code", None, json.dumps(value, ensure_ascii=False, default=repr)))


def arguments_diff(before: Any, after: Any) -> Safe:
    """The change from ``before`` to ``after`` as a unified diff of their JSON, line by line."""
    old = json.dumps(before, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    new = json.dumps(after, indent=2, ensure_ascii=False, sort_keys=True).splitlines()
    lines = [tag("span", {"class": {"+": "added", "-": "removed"}.get(line[:1], "same")}, line)
             for line in difflib.unified_diff(old, new, "asked", "edited", lineterm="", n=3)]
    return tag("pre", {"class": "diff"}, join(Safe(line + "\n") for line in lines))


def _seconds(start: float | None, end: float | None) -> str | None:
    if start is None or end is None:
        return None
    return f"{max(end - start, 0.0):.3f} s"


def _fact(name: str, *value: Any) -> Safe:
    return tag("div", {"class": "fact"}, tag("span", {"class": "name"}, name), " ", *value)


def _approval(view: CallView) -> Safe | None:
    approval = view.approval
    if approval is None:
        return None
    answer = "granted" if approval.granted else "refused"
    scope = " for the session" if approval.scope == "session" else " once"
    who = ("a person, at a pause (recorded later)" if approval.later
           else "the session's approver, when asked")
    return _fact("approval", f"{answer}{scope}, by {who}",
                 None if approval.reason is None else f" — {approval.reason}")


def _result(view: CallView) -> list[Safe]:
    terminal = view.terminal
    if terminal is None:
        return []
    facts = []
    if isinstance(terminal, ToolCallFailed):
        facts.append(_fact("failed", f"{terminal.kind}: {terminal.message}"))
    elif isinstance(terminal, ToolCallDenied):
        facts.append(_fact("denied", f"by {terminal.by}: {terminal.reason}",
                           None if terminal.rule is None else f" (rule {terminal.rule})"))
    elif not isinstance(terminal, ToolCallCompleted):
        facts.append(_fact(view.status, getattr(terminal, "reason", "")))
    result = terminal.result
    facts.append(_fact("result" + (" (an error)" if result.is_error else ""),
                       tag("pre", {"class": "text"}, "\n".join(result_lines(result)))))
    if result.structured_content is not None:
        facts.append(_fact("structured", json_tree(result.structured_content)))
    return facts


def _own_view(view: CallView, renderers: Renderers | None) -> Safe | None:
    """The plain text the tool's renderer gives for ``view``, or the note that it failed."""
    own = None if renderers is None else own_view_text(view, renderers)
    if own is None:
        return None
    said, failed = own
    if failed:
        return _fact("note", tag("span", {"class": "note"}, said))
    return _fact("view", tag("pre", {"class": "text own"}, said))


def call_html(folded: Folded, view: CallView, depth: int = 0,
              renderers: Renderers | None = None) -> Safe:
    """One call and, below it, the calls it made; each with its tool's own view, if
    ``renderers`` has one."""
    projection = folded.projection
    cid = view.call_id
    took = _seconds(folded.asked.get(cid), folded.ended.get(cid))
    # a call whose end the console has not read yet is not known to be running
    unread = folded.reading is not None and view.terminal is None
    head = tag("summary", None, tag("span", {"class": "tool"}, view.name), " ",
               tag("span", {"class": "status unread"}, "not read yet") if unread else
               tag("span", {"class": f"status {view.status}"}, view.status), " ",
               tag("span", {"class": "id"}, cid), None if took is None else f" {took}")
    facts: list[Safe | None] = [_fact("arguments", json_tree(view.arguments))]
    for rewrite in view.rewrites:
        facts.append(_fact(f"edited by {rewrite.by}",
                           arguments_diff(view.requested_arguments, rewrite.arguments)))
    if view.policy is not None:
        rule = view.policy.rule
        facts.append(_fact("policy", f"{view.policy.decision}: {view.policy.reason}",
                           None if rule is None else f" (rule {rule})"))
    facts.append(_approval(view))
    updates = folded.progress.get(cid, [])
    if updates:
        last = updates[-1]
        shown = [u.message for u in updates[-5:] if u.message]
        facts.append(_fact("progress", f"{len(updates)} update(s)",
                           None if last.progress is None else
                           f", {last.progress:g}" + ("" if last.total is None
                                                     else f" of {last.total:g}"),
                           tag("pre", {"class": "text"}, "\n".join(shown)) if shown else None))
    for question in view.questions:
        answer = question.answer
        facts.append(_fact(f"question {question.question_id}", question.asked.message, " → ",
                           "waiting" if answer is None else
                           f"{answer.action} {json.dumps(answer.content, ensure_ascii=False)}"))
    facts.extend(_result(view))
    facts.append(_own_view(view, renderers))
    timing = [f"{name} {_seconds(folded.asked.get(cid), moment)}"
              for name, moment in (("started after", folded.started.get(cid)),
                                   ("ended after", folded.ended.get(cid)))
              if moment is not None]
    if timing:
        facts.append(_fact("timings", ", ".join(timing)))
    children = projection.children(cid)
    nested: list[Safe] = []
    if children and depth < DEPTH:
        nested = [call_html(folded, projection.calls[c], depth + 1, renderers)
                  for c in children]
    elif children:
        nested = [tag("div", {"class": "more"}, f"{len(children)} nested calls, deeper")]
    return tag("details", {"class": "call", "id": f"call-{cid}", "open": view.terminal is None},
               head, tag("div", {"class": "facts"}, facts),
               tag("div", {"class": "nested"}, nested) if nested else None)


def call_tree(folded: Folded, page: int, renderers: Renderers | None = None
              ) -> tuple[Safe, int]:
    """Page ``page`` (from 0) of the top-level calls, each with its nested calls (and their
    tools' own views, if ``renderers`` has them); and how many pages there are."""
    calls = folded.projection.calls
    pages = max(1, -(-len(folded.roots) // ROOTS_PER_PAGE))
    shown = folded.roots[page * ROOTS_PER_PAGE:(page + 1) * ROOTS_PER_PAGE]
    return join(call_html(folded, calls[cid], renderers=renderers) for cid in shown), pages
