"""Replay from the page: the button re-drives the session with its recorded tools and shows
the report, each divergence linked to its call on the session's page; read-only hides it."""

from __future__ import annotations

import html
import re

import attrs

from events import MemoryStore
from events.types import PolicyDecided
from tests.web.webconsole import SID, Console, deleting, paused, resumed


async def finished(store: MemoryStore) -> None:
    """A session that paused at an approval, was approved on the page, and finished."""
    tools = await paused(store, deleting())
    async with Console(store) as console:
        assert (await console.answer(do="once", kind="approval", call="1.0")).status_code == 303
    await resumed(store, tools)


async def replay(console: Console, session_id: str = SID) -> str:
    page = await console.page("/session", id=session_id)
    form = re.search(r'<form method="post" action="/replay"[^>]*>(.*?)</form>', page, re.S)
    assert form is not None, "the session's page has no replay button"
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', form.group(1))
    assert csrf is not None
    response = await console.client.post(
        "/replay", data={"csrf": csrf.group(1), "session": session_id})
    assert response.status_code == 200, response.text
    return response.text


async def test_a_session_that_replays_as_recorded_says_so() -> None:
    store = MemoryStore()
    await finished(store)
    async with Console(store) as console:
        report = await replay(console)
    assert "The replay matched the log: no divergence." in report
    assert "divergences" not in report  # no table


async def test_each_divergence_links_to_its_call_on_the_session_page() -> None:
    store = MemoryStore()
    await finished(store)
    tampered = MemoryStore()  # the same log with the policy's recorded reason changed
    records = [attrs.evolve(r, event=attrs.evolve(r.event, reason="<b>tampered</b>"))
               if isinstance(r.event, PolicyDecided) else r for r in await store.read(SID)]
    await tampered.append(SID, records, 0)
    async with Console(tampered) as console:
        report = await replay(console)
        assert "1 divergence(s)" in report
        assert "&lt;b&gt;tampered&lt;/b&gt;" in report and "<b>tampered" not in report
        link = re.search(r'<a href="([^"]*#call-1\.0)">1\.0</a>', report)
        assert link is not None, report
        target, _, anchor = html.unescape(link.group(1)).partition("#")
        assert f'id="{anchor}"' in await console.page(target)


async def test_read_only_hides_the_button_and_refuses_a_replay() -> None:
    store = MemoryStore()
    await finished(store)
    async with Console(store, read_only=True) as console:
        assert 'action="/replay"' not in await console.page("/session", id=SID)
        refused = await console.client.post("/replay", data={"session": SID})
        assert refused.status_code == 403
    async with Console(store) as console:  # and a form without the CSRF token is refused
        refused = await console.client.post("/replay", data={"session": SID})
        assert refused.status_code == 403
        assert "CSRF" in refused.text
