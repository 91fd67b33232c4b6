"""The console as an ASGI application: :func:`console_app`.

Routes (under wherever the app is mounted): ``/`` the sessions list (``?state=``,
``?page=``), ``/session?id=ID`` one session (``&calls=N``: a page of its call tree),
``/pending`` every pending approval and question, ``/answer`` (POST) a person's answer,
``/replay`` (POST) a re-drive of one session with its recorded tools, and its report,
``/events?...`` the server-sent events that keep a page live, ``/static/...`` the shipped
stylesheet and script. Every route sits behind :class:`~engine.web.guard.Guard`. The app's
lifespan holds the nursery where long sessions are folded and long chains checked (see
:mod:`engine.web.folding`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from events.stores import EventStore

from ..core.reducers import LogInconsistency
from ..present.renderers import Renderers
from ..replay import ReplayError
from .answers import Refused, record_approval, record_question
from .calltree import ROOTS_PER_PAGE
from .chain import Chains
from .controls import approval_answer, question_answer
from .desk import WebDesk
from .folding import Sessions
from .guard import Guard, csrf_token
from .markup import Child, Safe, tag
from .pages import Page, layout, pending_page, session_page, sessions_page
from .replaying import replay_session, report_page
from .state import Folded, Summary, summary

__all__ = ["PER_PAGE", "console_app"]

#: How many sessions one page of the list shows.
PER_PAGE = 50
#: How much a posted form may hold (bytes): more is refused unread.
MAX_FORM = 2_000_000
#: How often (seconds) the list and the pending page look for changes to send.
POLL = 1.0
#: How often (seconds) a session's page is sent again while the console reads its log.
PROGRESS = 0.75
STATIC = Path(__file__).resolve().parent / "static"


def _parse(raw: bytes) -> dict[str, list[str]]:
    return parse_qs(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8",
                    errors="surrogatepass")


def _one(fields: Mapping[str, list[str]], name: str, default: str = "") -> str:
    return (fields.get(name) or [default])[0]


def _number(fields: Mapping[str, list[str]], name: str) -> int:
    text = _one(fields, name, "0")
    return int(text) if text.isdigit() and len(text) < 9 else 0


class _Console:
    """What the routes share: the store, its folded sessions, the chain checks, the desk."""

    def __init__(self, store: EventStore, token: str, read_only: bool,
                 desk: WebDesk | None, renderers: Renderers) -> None:
        self.store = store
        self.sessions = Sessions(store)
        self.chains = Chains(store, lambda: self.sessions.nursery)
        self.csrf = csrf_token(token)
        self.read_only = read_only
        self.desk = desk
        self.renderers = renderers

    def page(self, request: Request) -> Page:
        return Page(base=request.scope.get("root_path", "").rstrip("/"), csrf=self.csrf,
                    read_only=self.read_only)

    @asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        """While the app runs: the nursery of the background folds and chain checks."""
        async with self.sessions.running():
            yield

    def summary(self, folded: Any) -> Summary:
        return summary(folded, live=self.desk is not None and self.desk.runs(folded.session_id))

    # -- the pages ----------------------------------------------------------------------------

    async def list_body(self, page: Page, fields: Mapping[str, list[str]]) -> Safe:
        state = _one(fields, "state") or None
        number = _number(fields, "page")
        ids = await self.sessions.ids()
        deadline = trio.current_time() + self.sessions.wait  # one wait for the whole page
        chosen: list[Summary] = []
        more = False
        if state is None:
            window = ids[number * PER_PAGE:(number + 1) * PER_PAGE]
            chosen = [self.summary(await self.sessions.get(sid, deadline)) for sid in window]
            more = len(ids) > (number + 1) * PER_PAGE
        else:
            skip = number * PER_PAGE
            for sid in ids:
                row = self.summary(await self.sessions.get(sid, deadline))
                if row.state != state:
                    continue
                if skip:
                    skip -= 1
                elif len(chosen) == PER_PAGE:
                    more = True
                    break
                else:
                    chosen.append(row)
        # a row still being read is checked up to what the log holds, as its page is
        badges = await self.chains.badges([(row.session_id, row.reading or row.records)
                                           for row in chosen])
        return sessions_page(page, [(row, badges[row.session_id]) for row in chosen], state,
                             number, more)

    async def session_body(self, page: Page, fields: Mapping[str, list[str]],
                           deadline: float | None = None) -> tuple[Safe, Folded] | None:
        """The session's page body and its fold (as far as read by ``deadline``: see
        :meth:`Sessions.get`), or None for a session the log does not hold."""
        sid = _one(fields, "id")
        if sid not in await self.store.sessions():
            return None
        calls = _number(fields, "calls")
        # enough read for the page's calls (one more: the last one's end is read by then)
        folded = await self.sessions.get(sid, deadline, (calls + 1) * ROOTS_PER_PAGE + 1)
        # while reading, the check covers what the log holds: one check, not one a page
        badge = await self.chains.badge(sid, folded.reading or folded.last_seq)
        return session_page(page, folded, self.summary(folded), badge, calls,
                            self.renderers), folded

    async def pending_body(self, page: Page) -> Safe:
        deadline = trio.current_time() + self.sessions.wait
        folded = [await self.sessions.get(sid, deadline) for sid in await self.sessions.ids()]
        return pending_page(page, [f for f in folded
                                   if f.projection.pending_approvals
                                   or f.projection.pending_questions])

    # -- routes -------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        page = self.page(request)
        fields = _parse(request.scope.get("query_string", b""))
        body = await self.list_body(page, fields)
        return _html(layout(page, "Sessions", body, page.url("/events", view="list", **{
            k: v[0] for k, v in fields.items() if k in ("state", "page")})))

    async def session(self, request: Request) -> Response:
        page = self.page(request)
        fields = _parse(request.scope.get("query_string", b""))
        shown = await self.session_body(page, fields)
        if shown is None:
            return _html(layout(page, "Not found", tag(
                "p", None, "No session ", _one(fields, "id"), " in this log.")), 404)
        body, folded = shown
        sid = _one(fields, "id")
        return _html(layout(page, f"Session {sid}", body, page.url(
            "/events", view="session", id=sid, calls=_number(fields, "calls"),
            after=folded.last_seq)))

    async def pending(self, request: Request) -> Response:
        page = self.page(request)
        return _html(layout(page, "Pending", await self.pending_body(page),
                            page.url("/events", view="pending")))

    async def _form(self, request: Request) -> tuple[dict[str, list[str]], Response | None]:
        """A posted form's fields, or the page that refuses it: read-only, too large, without
        the CSRF token, or naming no session of this log."""
        page = self.page(request)
        if self.read_only:
            return {}, _html(layout(page, "Read-only", tag(
                "p", None, "This console is read-only (--read-only): it records no answers "
                "and replays nothing.")), 403)
        length = int(request.headers.get("content-length") or 0)
        if length > MAX_FORM:
            return {}, _html(layout(page, "Too large", tag(
                "p", None, "The form is too large.")), 413)
        fields = _parse(await request.body())
        if _one(fields, "csrf") != self.csrf:
            return {}, _html(layout(page, "Refused", tag("p", None, (
                "The form lacks this console's CSRF token: answer from a page this console "
                "served (reload it)."))), 403)
        sid = _one(fields, "session")
        if sid not in await self.store.sessions():
            return {}, _html(layout(page, "Not found", tag("p", None, "No session ", sid,
                                                           " in this log.")), 404)
        return fields, None

    async def _whole(self, page: Page, sid: str) -> tuple[Folded, Response | None]:
        """The session folded to its end, or the page that refuses to act on it while the
        console is still reading its log: an answer is checked against the whole session."""
        folded = await self.sessions.get(sid)
        if folded.reading is None:
            return folded, None
        back = page.url("/session", id=sid)
        return folded, _refusal(
            page, "Still reading", "Nothing was done: the console is still reading this "
            "session's log", 503, f"It has read {folded.last_seq:,} of {folded.reading:,} "
            "records; what waits for an answer, and whether it still does, is known only once "
            "it has read them all. Try again in a moment.",
            tag("a", {"href": back}, "Back to the session"), live=back)

    async def answer(self, request: Request) -> Response:
        page = self.page(request)
        fields, refused = await self._form(request)
        if refused is not None:
            return refused
        sid = _one(fields, "session")
        folded, unread = await self._whole(page, sid)
        if unread is not None:
            return unread
        try:
            if _one(fields, "kind") == "question":
                qid = _one(fields, "question")
                asked = folded.projection.question(qid)
                if asked is None:
                    raise Refused(f"no question {qid} in this session")
                await record_question(self.store, self.desk, folded, qid,
                                      question_answer(asked.asked.schema, fields))
            else:
                await record_approval(self.store, self.desk, folded, _one(fields, "call"),
                                      approval_answer(fields))
        except Refused as exc:
            back = page.url("/session", id=sid)
            return _refusal(page, "Not recorded", "The answer was not recorded", 400,
                            str(exc), tag("a", {"href": back}, "Back to the session"),
                            live=back)
        return RedirectResponse(page.url("/session", id=sid), 303)

    async def replay(self, request: Request) -> Response:
        """Re-drive the session with its recorded tools, and show the report."""
        page = self.page(request)
        fields, refused = await self._form(request)
        if refused is not None:
            return refused
        sid = _one(fields, "session")
        folded, unread = await self._whole(page, sid)
        if unread is not None:
            return unread
        try:
            report = await replay_session(self.store, sid)
        except ReplayError as exc:
            return _refusal(page, "Not replayed", "The session was not replayed", 422,
                            str(exc))
        return _html(layout(page, f"Replay of {sid}", report_page(page, folded, report)))

    async def unfoldable(self, request: Request, exc: Exception) -> Response:
        """A log whose records cannot follow each other: a page that says where, not a crash."""
        return _html(layout(self.page(request), "Log inconsistent", _unfoldable(exc)), 422)

    async def events(self, request: Request) -> Response:
        page = self.page(request)
        fields = _parse(request.scope.get("query_string", b""))
        view = _one(fields, "view")
        if view == "session":
            stream = self._session_events(page, fields)
        elif view in ("list", "pending"):
            stream = self._polled_events(page, fields, view)
        else:
            return Response("unknown view", 404)
        return StreamingResponse(stream, media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def _session_events(self, page: Page, fields: Mapping[str, list[str]]
                              ) -> AsyncIterator[str]:
        """The session's page body, again after each change the store's ``follow`` shows."""
        sid = _one(fields, "id")
        after = _number(fields, "after")
        yield "retry: 2000\n\n"
        try:
            while True:  # while the console reads the log: the page as far as read, now and then
                shown = await self.session_body(page, fields,
                                                trio.current_time() + PROGRESS)
                if shown is None:
                    return
                if shown[1].last_seq > after:
                    after = shown[1].last_seq
                    yield _event(shown[0], after)
                if shown[1].reading is None:
                    break
            async for record in self.store.follow(sid, after):
                if await self.store.last_seq(sid) > record.seq:
                    continue  # more is stored already: send the page once, after the last
                shown = await self.session_body(page, fields)
                if shown is not None:
                    yield _event(shown[0], record.seq)
        except LogInconsistency as exc:  # the page becomes the error page, and stays so
            yield _event(_unfoldable(exc), None)

    async def _polled_events(self, page: Page, fields: Mapping[str, list[str]], view: str
                             ) -> AsyncIterator[str]:
        """The list's or the pending page's body, again whenever a session grew."""
        yield "retry: 2000\n\n"
        seen: tuple[tuple[str, int], ...] | None = None
        while True:
            ids = await self.store.sessions()
            now = tuple([(sid, await self.store.last_seq(sid)) for sid in ids])
            if seen is not None and now != seen:
                body = (await self.list_body(page, fields) if view == "list"
                        else await self.pending_body(page))
                yield _event(body, None)
            seen = now
            await trio.sleep(POLL)


def _unfoldable(exc: Exception) -> Safe:
    """What the page of a session whose log cannot be folded says instead."""
    return _refused("This log cannot be read as a session", str(exc),
                    "The records up to that one are shown nowhere else: check the log with "
                    "toolledger verify, and read it with toolledger show.")


def _refused(heading: str, *paragraphs: Child) -> Safe:
    return tag("div", {"class": "refused"}, tag("h1", None, heading),
               *(tag("p", None, paragraph) for paragraph in paragraphs))


def _event(body: str, seq: int | None) -> str:
    lines = "".join(f"data: {line}\n" for line in body.split("\n"))
    return "event: update\n" + (f"id: {seq}\n" if seq is not None else "") + lines + "\n"


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status)


def _refusal(page: Page, title: str, heading: str, status: int, *paragraphs: Child,
             live: str | None = None) -> HTMLResponse:
    """A page that says what was not done and why: ``heading``, then a paragraph each."""
    return _html(layout(page, title, _refused(heading, *paragraphs), live), status)


def console_app(store: EventStore, *, token: str, read_only: bool = False,
                desk: WebDesk | None = None, renderers: Renderers | None = None) -> Guard:
    """The web console over ``store``, as an ASGI app: serve it (``toolledger web``), or mount
    it in a host's Starlette app (``Mount("/console", console_app(...))``) and run its
    lifespan in the host's (:func:`~engine.web.lifespan.lifespan`): the nursery where long
    sessions are folded while their pages are served (see :mod:`engine.web.folding`).

    ``token`` is required on every request (see :mod:`engine.web.guard`): draw a random one
    (``secrets.token_urlsafe()``) and give the person the URL with ``?token=...``.
    ``read_only`` hides every control and refuses every answer. ``desk``: the
    :class:`~engine.web.desk.WebDesk` through which this process runs sessions, so that
    their approvals and questions are answered at once. ``renderers``: the tools' own views
    (:class:`~engine.present.renderers.Renderers`, e.g. ``Renderers()`` then
    ``.load(("mypackage.views",))``), whose plain text each call's view shows; none if not
    given.
    """
    console = _Console(store, token, read_only, desk,
                       Renderers() if renderers is None else renderers)
    app = Starlette(routes=[
        Route("/", console.index),
        Route("/session", console.session),
        Route("/pending", console.pending),
        Route("/answer", console.answer, methods=["POST"]),
        Route("/replay", console.replay, methods=["POST"]),
        Route("/events", console.events),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ], exception_handlers={LogInconsistency: console.unfoldable}, lifespan=console.lifespan)
    return Guard(app, token)
