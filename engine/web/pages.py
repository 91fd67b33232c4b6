"""The console's pages, rendered on the server: the sessions list, one session, and every
pending approval and question. Each page is HTML built with :func:`~engine.web.markup.tag`,
so what a log says is escaped on its way in; the live part of a page (``id="live"``) is also
what the server sends over server-sent events when the session changes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from urllib.parse import quote

import attrs

from events.types import Annotations, AssistantMessage, UserMessage

from ..core.approvals import ApprovalRequest
from ..core.questions import Question
from ..present.render import result_lines
from ..present.renderers import Renderers
from .calltree import call_tree
from .controls import approval_form, question_form
from .markup import Safe, join, tag
from .state import Folded, Summary

__all__ = ["Page", "layout", "pending_requests", "replay_form", "session_link",
           "sessions_page"]


@attrs.frozen
class Page:
    """What every page needs to know of the request: where the console is mounted, the CSRF
    token its forms carry, whether controls are shown, and the verify badge of the log."""

    base: str
    csrf: str
    read_only: bool

    def url(self, path: str, **query: str | int) -> str:
        """``path`` under the console's mount point, with ``query`` (each value quoted)."""
        text = "&".join(f"{key}={quote(str(value), safe='', errors='surrogatepass')}"
                        for key, value in query.items())
        return f"{self.base}{path}" + (f"?{text}" if text else "")


def session_link(page: Page, session_id: str) -> str:
    return page.url("/session", id=session_id)


def layout(page: Page, title: str, body: Safe, live: str | None = None) -> str:
    """A whole page: the shipped stylesheet and script (nothing inline, nothing from elsewhere:
    the Content-Security-Policy allows only the console's own files) around ``body``."""
    nav = tag("nav", None, tag("a", {"href": page.url("/")}, "Sessions"), " · ",
              tag("a", {"href": page.url("/pending")}, "Pending"),
              tag("span", {"class": "badge"}, " read-only") if page.read_only else None)
    return "<!doctype html>\n" + tag(
        "html", {"lang": "en"},
        tag("head", None, tag("meta", {"charset": "utf-8"}),
            tag("title", None, f"{title} — toolledger"),
            tag("link", {"rel": "stylesheet", "href": page.url("/static/console.css")}),
            tag("link", {"rel": "icon", "href": page.url("/static/favicon.svg")}),
            tag("script", {"src": page.url("/static/console.js"), "defer": True})),
        tag("body", None, nav, tag("main", {"id": "live", "data-events": live}, body)))


def _when(moment: float | None) -> str:
    if moment is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))


STATES = ("running", "waiting", "paused", "closed")


def _as_far(summary: Summary) -> str:
    return f"as far as read: {summary.records:,} of {summary.reading:,} records"


def reading_notice(summary: Summary) -> Safe | None:
    """While the console still reads the session's log: what the page shows, and what not."""
    if summary.reading is None:
        return None
    return tag("p", {"class": "reading"}, tag("b", None, "Still reading this session's log: "),
               f"read {summary.records:,} of {summary.reading:,} records. The state, counts, "
               "pending requests and chain badge are as far as read; calls whose end is not "
               "read yet say so. This page updates as reading goes on, and its controls "
               "appear once the whole log is read.")


def sessions_page(page: Page, rows: Sequence[tuple[Summary, str]], state: str | None,
                  number: int, more: bool) -> Safe:
    """The list: one row per session, newest first, ``number`` the page (from 0)."""
    filters = [tag("a", {"href": page.url("/"), "class": "on" if state is None else None}, "all")]
    filters += [tag("a", {"href": page.url("/", state=name),
                          "class": "on" if state == name else None}, name) for name in STATES]
    head = tag("tr", None, [tag("th", None, name) for name in (
        "session", "state", "last activity", "model", "calls", "records", "chain")])
    body = [tag("tr", {"class": summary.state}, tag("td", None, tag(
        "a", {"href": session_link(page, summary.session_id)}, summary.session_id)),
        tag("td", None, summary.state,
            tag("div", {"class": "whom"}, summary.waiting_for) if summary.waiting_for else None,
            tag("div", {"class": "reading"}, _as_far(summary)) if summary.reading else None),
        tag("td", None, _when(summary.last_time)), tag("td", None, summary.model or "—"),
        tag("td", None, summary.calls), tag("td", None, summary.records),
        tag("td", {"class": "chain"}, chain)) for summary, chain in rows]
    query = {} if state is None else {"state": state}
    paging = [tag("a", {"href": page.url("/", **query, page=number - 1)}, "← newer")
              if number else None,
              tag("a", {"href": page.url("/", **query, page=number + 1)}, "older →")
              if more else None]
    return join([tag("h1", None, "Sessions"), tag("p", {"class": "filters"}, "state: ",
                                                   join(join([f, " "]) for f in filters)),
                 tag("table", {"class": "sessions"}, head, body) if rows else
                 tag("p", None, "No sessions" + ("" if state is None else f" {state}") + "."),
                 tag("p", {"class": "paging"}, paging)])


def pending_requests(folded: Folded) -> tuple[list[ApprovalRequest], list[Question]]:
    """The session's pending approvals and questions, as its approver and asker see them."""
    projection = folded.projection
    approvals = []
    for call_id in projection.pending_approvals:
        view = projection.calls[call_id]
        snapshot = projection.tools.get(view.name)
        approvals.append(ApprovalRequest(
            call_id=call_id, name=view.name, arguments=view.arguments,
            reason=view.policy.reason if view.policy is not None else "",
            annotations=snapshot.annotations if snapshot is not None else Annotations(),
            origin=view.origin, parent_id=view.parent_id))
    questions = []
    for question_id in projection.pending_questions:
        asked = projection.question(question_id)
        if asked is None:
            continue
        view = projection.calls[asked.asked.call_id]
        questions.append(Question(
            question_id=question_id, call_id=view.call_id, name=view.name,
            message=asked.asked.message, schema=asked.asked.schema, origin=view.origin,
            parent_id=view.parent_id))
    return approvals, questions


def pending_section(page: Page, folded: Folded) -> Safe | None:
    """What waits in the session, each with its form (none in read-only mode)."""
    approvals, questions = pending_requests(folded)
    if not approvals and not questions:
        return None
    sid = folded.session_id
    action = page.url("/answer")
    # an answer is checked against the whole session: no controls on a part of it
    page = page if folded.reading is None else attrs.evolve(page, read_only=True)
    items = []
    for request in approvals:
        items.append(tag("div", {"class": "request"}, tag("h3", None, "Approve ", tag(
            "span", {"class": "tool"}, request.name), " ", tag("a", {
                "href": session_link(page, sid) + f"#call-{quote(request.call_id, errors='surrogatepass')}"},
                request.call_id), "?"),
            tag("p", {"class": "reason"}, request.reason),
            tag("pre", {"class": "text"}, _json(request.arguments)),
            None if page.read_only else approval_form(action, page.csrf, sid, request)))
    for question in questions:
        items.append(tag("div", {"class": "request"}, tag("h3", None, "Question ",
                                                          question.question_id, " from ",
                                                          tag("span", {"class": "tool"},
                                                              question.name)),
                         tag("p", {"class": "message"}, question.message),
                         None if page.read_only else
                         question_form(action, page.csrf, sid, question)))
    return tag("section", {"class": "pending"}, tag("h2", None, "Waiting for a person"), items)


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=repr)


def pending_page(page: Page, sessions: Sequence[Folded]) -> Safe:
    """Every pending approval and question of every session, a section per session."""
    parts = []
    for folded in sessions:
        section = pending_section(page, folded)
        if section is not None:
            parts.append(tag("h2", None, "Session ", tag(
                "a", {"href": session_link(page, folded.session_id)}, folded.session_id)))
            parts.append(section)
    if not parts:
        parts.append(tag("p", None, "Nothing waits for an answer."))
    return join([tag("h1", None, "Pending approvals and questions"), parts])


def replay_form(page: Page, session_id: str) -> Safe | None:
    """The button that replays the session (none in read-only mode)."""
    if page.read_only:
        return None
    return tag("form", {"method": "post", "action": page.url("/replay"), "class": "replay"},
               tag("input", {"type": "hidden", "name": "csrf", "value": page.csrf}),
               tag("input", {"type": "hidden", "name": "session", "value": session_id}),
               tag("button", None, "Replay with the recorded tools"))


#: How many transcript entries one page of a session shows (the page of its call tree).
ENTRIES_PER_PAGE = 300


def _transcript(folded: Folded, page: int) -> tuple[Safe, int]:
    """Page ``page`` (from 0) of the transcript, and how many pages it has."""
    transcript = folded.projection.transcript
    pages = max(1, -(-len(transcript) // ENTRIES_PER_PAGE))
    entries = []
    for entry in transcript[page * ENTRIES_PER_PAGE:(page + 1) * ENTRIES_PER_PAGE]:
        if isinstance(entry, UserMessage):
            entries.append(tag("div", {"class": "entry user"}, tag("b", None, "user"),
                               tag("pre", {"class": "text"}, entry.text)))
        elif isinstance(entry, AssistantMessage):
            calls = [tag("div", {"class": "asked"}, "→ ", c.name) for c in entry.tool_calls]
            entries.append(tag("div", {"class": "entry assistant"},
                               tag("b", None, f"assistant (turn {entry.turn})"),
                               tag("pre", {"class": "text"}, entry.text), calls))
        else:
            result = entry.result
            entries.append(tag("div", {"class": "entry tool_result" + (
                " error" if result.is_error else "")}, tag("b", None, "result of ", tag(
                    "a", {"href": f"#call-{quote(entry.call_id, errors='surrogatepass')}"},
                    entry.name)),
                tag("pre", {"class": "text"}, "\n".join(result_lines(result)))))
    return join(entries), pages


def session_page(page: Page, folded: Folded, summary: Summary, chain: str,
                 calls_page: int, renderers: Renderers | None = None) -> Safe:
    """One session: its facts, what waits, the transcript beside the call tree; both paged,
    ``calls_page`` the page (from 0) of each; each call with its tool's own view, if
    ``renderers`` has one."""
    page = page if folded.reading is None else attrs.evolve(page, read_only=True)
    tree, tree_pages = call_tree(folded, calls_page, renderers)
    transcript, transcript_pages = _transcript(folded, calls_page)
    pages = max(tree_pages, transcript_pages)
    sid = folded.session_id
    near = sorted({0, pages - 1, *range(max(calls_page - 3, 0), min(calls_page + 4, pages))})
    paging = [tag("a", {"href": page.url("/session", id=sid, calls=n)},
                  f"{n + 1}" if n != calls_page else f"[{n + 1}]") for n in near] \
        if pages > 1 else []
    facts = tag("p", {"class": "facts"}, tag("span", {"class": f"state {summary.state}"},
                                              summary.state),
                f" · {summary.waiting_for}" if summary.waiting_for else None,
                f" · model {summary.model}" if summary.model else None,
                f" · {summary.calls} calls · {summary.records} records · last activity "
                f"{_when(summary.last_time)} · ", tag("span", {"class": "chain"}, chain),
                replay_form(page, sid))
    return join([
        tag("h1", None, "Session ", tag("span", {"class": "id"}, sid)), facts,
        reading_notice(summary), pending_section(page, folded),
        tag("div", {"class": "columns"},
            tag("section", {"class": "transcript"}, tag("h2", None, "Transcript"), transcript),
            tag("section", {"class": "calls"}, tag("h2", None, "Calls"),
                tag("p", {"class": "paging"}, join(join([p, " "]) for p in paging))
                if paging else None, tree)),
    ])
