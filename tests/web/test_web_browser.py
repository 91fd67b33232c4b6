"""The console in headless Chromium, served for real: a person opens the list, watches a
running session grow, approves, denies with a reason, answers a question and edits arguments,
and the sessions go on. The page's console log must stay free of errors throughout: a script or
style the Content-Security-Policy blocked would show there.

Without Chromium (Debian: ``apt-get install chromium chromium-driver``) these tests skip and
say why; with ``TOOLLEDGER_REQUIRE_BROWSER=1`` (as .ci/run sets) they fail instead."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.web import WebDesk, console_app
from events import MemoryStore
from tests.web.browser import (REQUIRE_VARIABLE, BrowserUnavailable, console_in_browser,
                               profile_folder, start_chromium)
from tests.web.screenshots import PAGES, WIDTH, shoot_all
from tests.web.webconsole import SID, Tools, deleting, paused, resumed

TOKEN = "browser-test-token"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the module's tests, with a fresh profile."""
    profile = profile_folder()
    try:
        driver = start_chromium(profile)
    except BrowserUnavailable as exc:
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail(f"{REQUIRE_VARIABLE}=1 but {exc}", pytrace=False)
        pytest.skip(f"browser tests skipped: {exc}")
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def app(store: MemoryStore, desk: WebDesk | None = None) -> Any:
    return console_app(store, token=TOKEN, desk=desk)


async def test_the_list_shows_each_session_and_its_state(chromium: Any) -> None:
    store = MemoryStore()
    await paused(store, deleting(), session_id="waits")
    await paused(store, faux_tool_call("deploy"), session_id="asks")
    async with console_in_browser(chromium, app(store), TOKEN) as browser:
        assert "token" not in chromium.current_url  # it left the address bar
        await browser.wait_for("table.sessions tr.paused", "waits")
        await browser.wait_for("table.sessions tr.paused", "asks")
        await browser.click("a", "paused")
        await browser.wait_for("a.on", "paused")
        await browser.click("table.sessions a", "waits")
        await browser.wait_for("h1", "Session waits")
        await browser.wait_for("section.pending", "delete_file")
        await browser.click("nav a", "Pending")
        await browser.wait_for("h2", "Session waits")
        await browser.wait_for("h2", "Session asks")


async def test_a_running_session_s_new_call_appears_on_its_open_page(chromium: Any) -> None:
    store = MemoryStore()
    tools = Tools()
    model = FauxModel([faux_text("hello"), faux_tool_call("delete_file", {"path": "later.md"}),
                       faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, approver=approve_all,
                            session_id=SID, create=True) as session:
        await session.prompt("hi")
        async with console_in_browser(chromium, app(store), TOKEN) as browser:
            await browser.open(f"/session?id={SID}")
            await browser.wait_for("section.transcript", "hello")
            assert "delete_file" not in await browser.wait_for("section.calls")
            await session.prompt("delete later.md")  # the page is not reloaded
            await browser.wait_for("section.calls", "delete_file")
            await browser.wait_for("section.transcript", "deleted later.md")
    assert tools.ran == [("delete_file", {"path": "later.md"})]


async def test_an_approval_given_in_the_browser_lets_the_running_session_finish(
        chromium: Any) -> None:
    store = MemoryStore()
    desk = WebDesk()
    tools = Tools()
    model = FauxModel([deleting(), faux_text("all done")])
    finished = trio.Event()
    async with console_in_browser(chromium, app(store, desk), TOKEN) as browser:
        async with desk.open(store, model=model, tools=tools.specs, session_id=SID,
                             create=True) as session, trio.open_nursery() as nursery:

            async def run() -> None:
                assert (await session.prompt("go")).stop == "end_turn"
                finished.set()

            nursery.start_soon(run)
            await browser.open("/pending")
            await browser.wait_for("section.pending", "delete_file")  # the list updates live
            await browser.click("h2 a", SID)
            await browser.click("button", "Approve once")
            await finished.wait()
            await browser.wait_for("section.transcript", "all done")
            await browser.wait_gone("section.pending")
    assert tools.ran == [("delete_file", {"path": "notes.md"})]


async def test_a_denial_s_reason_reaches_the_transcript(chromium: Any) -> None:
    store = MemoryStore()
    tools = await paused(store, deleting())
    async with console_in_browser(chromium, app(store), TOKEN) as browser:
        await browser.open(f"/session?id={SID}")
        await browser.type("input[name=reason]", "not on a Friday")
        await browser.click("button.deny")
        await browser.wait_gone("section.pending")  # recorded; back on the session's page
        await browser.wait_for("h1", SID)
        await resumed(store, tools)  # where its tools are
        await browser.wait_for("section.transcript .tool_result", "not on a Friday")
    assert tools.ran == []


async def test_a_question_is_answered_through_its_form(chromium: Any) -> None:
    store = MemoryStore()
    tools = await paused(store, faux_tool_call("deploy"))
    async with console_in_browser(chromium, app(store), TOKEN) as browser:
        await browser.open(f"/session?id={SID}")
        await browser.wait_for("section.pending", "Which branch?")
        await browser.type("input[name='f.branch']", "main")
        await browser.click("input[name='f.force']")
        await browser.click("button", "Answer")
        await browser.wait_gone("section.pending")
        await resumed(store, tools)
        await browser.wait_for("section.transcript", "deployed main")
    assert tools.ran == [("deploy", "accept", {"branch": "main", "force": True})]


async def test_edited_arguments_are_refused_when_wrong_and_shown_as_a_diff(
        chromium: Any) -> None:
    store = MemoryStore()
    tools = await paused(store, deleting("notes.md"))
    async with console_in_browser(chromium, app(store), TOKEN) as browser:
        await browser.open(f"/session?id={SID}")
        await browser.click("details.edit summary")
        await browser.type("textarea[name=arguments]", '{"path": 3}', clear=True)
        await browser.click("button", "Approve with these arguments")
        await browser.wait_for(".refused", "input schema")
        await browser.console_errors()  # the refusal's 400, as the browser logs it
        await browser.click(".refused a", "Back to the session")
        await browser.click("details.edit summary")
        await browser.type("textarea[name=arguments]", '{"path": "old/notes.md"}', clear=True)
        await browser.click("button", "Approve with these arguments")
        await browser.wait_gone("section.pending")
        await browser.wait_for(".removed", '"path": "notes.md"')
        await browser.wait_for(".added", '"path": "old/notes.md"')
        await resumed(store, tools)
        await browser.wait_for("section.transcript", "deleted old/notes.md")
    assert tools.ran == [("delete_file", {"path": "old/notes.md"})]


async def test_hostile_text_stays_text_and_runs_nothing(chromium: Any) -> None:
    hostile = ("<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"
               "\x1b[31m\x9b\u202e")
    store = MemoryStore()
    model = FauxModel([faux_text(hostile)])
    async with Session.open(store, model=model, session_id=hostile[:30],
                            create=True) as session:
        await session.prompt(hostile)
    async with console_in_browser(chromium, app(store), TOKEN) as browser:
        await browser.click("table.sessions a", "<script>")
        shown = await browser.wait_for("section.transcript", "<script>window.pwned = 1</script>")
        assert "<img src=x onerror=" in shown
        assert await browser.script("return window.pwned === undefined") is True
        scripts = await browser.script(
            "return Array.from(document.scripts).map((s) => s.getAttribute('src'))")
        assert scripts == ["/static/console.js"]


async def test_the_screenshots_command_writes_each_main_page(chromium: Any,
                                                             tmp_path: Path) -> None:
    await shoot_all(chromium, tmp_path)
    for name in PAGES:
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n", name
        width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk's first fields
        assert width == WIDTH and 200 < height, (name, width, height)
