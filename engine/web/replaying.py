"""Replay from the page: re-drive one session with its recorded tools, as ``toolledger replay``
does (:func:`~engine.replay.redrive`, ``tool_mode="recorded"``), and show the report, each
divergence about a call linked to that call on the session's page.

The replay runs in a thread of its own, in a trio loop of its own with a virtual clock (as
the command runs it: nothing waits for the world, so a recorded timeout replays at once), and
the console goes on serving meanwhile. The log is only read; a store that keeps artifacts
gives the replay the whole of a long result, read through the console's own loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any
from urllib.parse import quote

import trio

from events.stores import EventStore
from events.stores.base import keeps_artifacts

from ..replay import Divergence, ReplayError, ReplayReport, redrive
from ..replay.clock import virtual_clock
from .calltree import ROOTS_PER_PAGE
from .markup import Safe, join, tag
from .pages import Page
from .state import Folded

__all__ = ["SHOWN", "call_link", "replay_session", "report_page"]

#: How many divergences the report's page lists (the rest are counted).
SHOWN = 500


class _Artifacts:
    """The console's store's artifacts, for a replay running in another thread's loop."""

    def __init__(self, store: Any, token: trio.lowlevel.TrioToken) -> None:
        self._store = store
        self._token = token

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        raise ReplayError("a replay keeps no artifacts")  # the log is only read

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        result: bytes | None = trio.from_thread.run(
            self._store.get_artifact, session_id, call_id, sha256, trio_token=self._token)
        return result


async def replay_session(store: EventStore, session_id: str) -> ReplayReport:
    """Re-drive ``session_id`` with its recorded tools; :class:`ReplayError` if its records
    are not one consistent session."""
    records = await store.read(session_id)
    artifacts = (_Artifacts(store, trio.lowlevel.current_trio_token())
                 if keeps_artifacts(store) else None)
    run = partial(redrive, records, tool_mode="recorded", artifacts=artifacts)
    clock = virtual_clock()
    report: ReplayReport = await trio.to_thread.run_sync(partial(trio.run, run, clock=clock))
    return report


def call_link(page: Page, session_id: str, call_id: str, position: Mapping[str, int]) -> str:
    """Where ``call_id`` is drawn on the session's page: on the page of its top-level call
    (``position``: each top-level call's place among them)."""
    number = position.get(call_id.partition("/")[0], 0) // ROOTS_PER_PAGE
    return (page.url("/session", id=session_id, calls=number) + "#call-"
            + quote(call_id, errors="surrogatepass"))


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def _divergence(page: Page, folded: Folded, found: Divergence, position: Mapping[str, int]
                ) -> Safe:
    subject: Safe | str = found.subject
    if found.scope == "call" and found.subject in folded.projection.calls:
        subject = tag("a", {"href": call_link(page, folded.session_id, found.subject, position)},
                      found.subject)
    where = " ".join(part for part in (found.event, found.field) if part)
    return tag("tr", {"class": found.kind}, tag("td", None, found.scope),
               tag("td", None, found.kind), tag("td", {"class": "subject"}, subject),
               tag("td", None, found.tool or ""), tag("td", None, where),
               tag("td", None, tag("code", None, _value(found.recorded))),
               tag("td", None, tag("code", None, _value(found.now))))


def report_page(page: Page, folded: Folded, report: ReplayReport) -> Safe:
    """The replay's report: what it covered, its notes, and every divergence."""
    sid = folded.session_id
    verdict = ("The replay matched the log: no divergence." if report.ok else
               f"{len(report.divergences)} divergence(s), the first of each call.")
    head = tag("tr", None, [tag("th", None, name) for name in (
        "scope", "kind", "subject", "tool", "where", "recorded", "now")])
    position = {cid: n for n, cid in enumerate(folded.roots)} if report.divergences else {}
    rows = [_divergence(page, folded, found, position) for found in report.divergences[:SHOWN]]
    more = len(report.divergences) - SHOWN
    return join([
        tag("h1", None, "Replay of ", tag("a", {"href": page.url("/session", id=sid)}, sid)),
        tag("p", {"class": "facts"}, f"recorded tools · {report.records} records · "
            f"{report.calls} calls · {report.transcript_entries} transcript entries"),
        tag("p", {"class": "verdict " + ("ok" if report.ok else "diverged")}, verdict),
        tag("ul", {"class": "notes"}, [tag("li", None, note) for note in report.notes])
        if report.notes else None,
        tag("table", {"class": "divergences"}, head, rows) if rows else None,
        tag("p", None, f"… and {more} more (toolledger replay lists them all).")
        if more > 0 else None,
    ])
