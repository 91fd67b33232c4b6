"""The web console without a browser: its token and CSRF token are enforced, read-only shows
and takes no answer, and an answer given on a page is recorded through the session's own
controls, so that the session finishes where its tools are when it is resumed."""

from __future__ import annotations

import re
from pathlib import Path

import trio
import trio.testing

from engine import Session
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.web import WebDesk
from events import JsonlStore, MemoryStore
from events.types import (
    ApprovalResolved,
    Record,
    ToolCallDenied,
    ToolCallRewritten,
    UserMessage,
)
from tests.web.webconsole import SID, Console, Tools, deleting, paused, resumed


async def test_every_request_needs_the_token_and_every_response_a_strict_policy() -> None:
    store = MemoryStore()
    await paused(store, deleting())
    console = Console(store)
    async with console.client as client:
        for path in ("/", "/pending", f"/session?id={SID}", "/static/console.js",
                     "/events?view=list"):
            refused = await client.get(path)
            assert refused.status_code == 403, path
            assert "?token=" in refused.text
        wrong = await client.get("/", params={"token": "x" * 43})
        assert wrong.status_code == 403
        entered = await client.get("/", params={"token": console.token, "state": "paused"})
        assert entered.status_code == 303
        assert entered.headers["location"] == "/?state=paused"  # the token leaves the URL
        cookie = entered.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = await client.get("/")
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
    bearer = Console(store)
    async with bearer.client as client:
        shown = await client.get("/", headers={"authorization": f"Bearer {bearer.token}"})
        assert shown.status_code == 200 and SID in shown.text


async def test_a_form_without_the_csrf_token_is_refused_and_records_nothing() -> None:
    store = MemoryStore()
    await paused(store, deleting())
    before = await store.last_seq(SID)
    async with Console(store) as console:
        for csrf in ("", "0" * 64):
            refused = await console.post(csrf=csrf, session=SID, call="1.0", kind="approval",
                                         do="once")
            assert refused.status_code == 403
            assert "CSRF" in refused.text
    assert await store.last_seq(SID) == before


async def test_read_only_shows_no_control_and_takes_no_answer() -> None:
    store = MemoryStore()
    await paused(store, deleting())
    before = await store.last_seq(SID)
    async with Console(store, read_only=True) as console:
        page = await console.page("/session", id=SID)
        pending = await console.page("/pending")
        assert "delete_file" in page and "delete_file" in pending  # what waits is shown
        assert "<form" not in page and "<form" not in pending
        assert "read-only" in page
        assert "csrf" not in page
        refused = await console.post(csrf="", session=SID, call="1.0", kind="approval",
                                     do="once")
        assert refused.status_code == 403 and "read-only" in refused.text
    assert await store.last_seq(SID) == before


async def test_an_approval_given_on_the_page_lets_the_resumed_session_finish(
        tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "log.jsonl")
    tools = await paused(store, deleting())
    async with Console(store) as console:
        listed = await console.page("/", state="paused")
        assert SID in listed and "approval of delete_file" in listed
        answered = await console.answer(call="1.0", kind="approval", do="once")
        assert answered.status_code == 303
        assert "Nothing waits" in await console.page("/pending")
    session = await resumed(store, tools)
    assert tools.ran == [("delete_file", {"path": "notes.md"})]
    approval = session.calls["1.0"].approval
    assert approval is not None and approval.granted and approval.later


async def test_approval_for_the_session_is_recorded_with_its_scope() -> None:
    store = MemoryStore()
    await paused(store, deleting())
    async with Console(store) as console:
        await console.answer(call="1.0", kind="approval", do="session")
    resolved = [r.event for r in await store.read(SID) if isinstance(r.event, ApprovalResolved)]
    assert [(e.granted, e.scope) for e in resolved] == [(True, "session")]


async def test_a_denial_with_a_reason_reaches_the_transcript() -> None:
    store = MemoryStore()
    tools = await paused(store, deleting())
    async with Console(store) as console:
        await console.answer(call="1.0", kind="approval", do="deny",
                             reason="not on a Friday")
        page = await console.page("/session", id=SID)
        assert "not on a Friday" in page
    session = await resumed(store, tools)
    assert tools.ran == []
    denied = [r.event for r in await store.read(SID) if isinstance(r.event, ToolCallDenied)]
    assert [d.reason for d in denied] == ["not on a Friday"]
    assert "not on a Friday" in session.calls["1.0"].result.text


async def test_edited_arguments_are_checked_against_the_schema_then_shown_as_a_diff() -> None:
    store = MemoryStore()
    tools = await paused(store, deleting("notes.md"))
    before = await store.last_seq(SID)
    async with Console(store) as console:
        for wrong, said in (('{"path": 3}', "input schema"), ("{not json", "not JSON"),
                            ('["a"]', "JSON object")):
            refused = await console.answer(call="1.0", kind="approval", do="edit",
                                           arguments=wrong)
            assert refused.status_code == 400 and said in refused.text
        assert await store.last_seq(SID) == before
        done = await console.answer(call="1.0", kind="approval", do="edit",
                                    arguments='{"path": "old/notes.md"}')
        assert done.status_code == 303
        page = await console.page("/session", id=SID)
        assert 'class="removed">-  &quot;path&quot;: &quot;notes.md&quot;' in page
        assert 'class="added">+  &quot;path&quot;: &quot;old/notes.md&quot;' in page
    await resumed(store, tools)
    assert tools.ran == [("delete_file", {"path": "old/notes.md"})]
    edits = [r.event for r in await store.read(SID) if isinstance(r.event, ToolCallRewritten)]
    assert [(e.by, e.arguments) for e in edits] == [("approver", {"path": "old/notes.md"})]


async def test_a_question_is_answered_through_a_form_built_from_its_schema() -> None:
    store = MemoryStore()
    tools = await paused(store, faux_tool_call("deploy"))
    async with Console(store) as console:
        page = await console.page("/session", id=SID)
        assert 'name="f.branch"' in page and 'type="checkbox" name="f.force"' in page
        empty = await console.answer(kind="question", question="1.0#1", do="accept",
                                     **{"f.branch": ""})
        assert empty.status_code == 400 and "branch" in empty.text
        done = await console.answer(kind="question", question="1.0#1", do="accept",
                                    **{"f.branch": "main", "f.force": "true"})
        assert done.status_code == 303
    await resumed(store, tools)
    assert tools.ran[-1] == ("deploy", "accept", {"branch": "main", "force": True})


async def test_a_session_its_owner_holds_open_is_not_answered_behind_its_back() -> None:
    store = MemoryStore()
    tools = await paused(store, deleting())
    before = await store.last_seq(SID)
    async with Console(store) as console:
        async with Session.open(store, tools=tools.specs, session_id=SID):
            refused = await console.answer(call="1.0", kind="approval", do="once")
            assert refused.status_code == 400
            assert "open in another process" in refused.text
    assert await store.last_seq(SID) == before


async def test_a_session_run_through_the_desk_gets_its_answer_at_once() -> None:
    store = MemoryStore()
    desk = WebDesk()
    tools = Tools()
    model = FauxModel([deleting(), faux_text("done")])
    async with Console(store, desk=desk) as console:
        async with desk.open(store, model=model, tools=tools.specs, session_id=SID,
                             create=True) as session, trio.open_nursery() as nursery:
            finished = trio.Event()

            async def run() -> None:
                result = await session.prompt("go")
                assert result.stop == "end_turn"
                finished.set()

            nursery.start_soon(run)
            await trio.testing.wait_all_tasks_blocked()
            assert "waiting" in await console.page("/", state="waiting")
            answered = await console.answer(call="1.0", kind="approval", do="once")
            assert answered.status_code == 303
            await finished.wait()
    assert tools.ran == [("delete_file", {"path": "notes.md"})]
    approval = [r.event for r in await store.read(SID) if isinstance(r.event, ApprovalResolved)]
    assert [a.later for a in approval] == [False]  # the approver's own answer, when asked


async def test_a_log_that_cannot_be_folded_gets_a_page_that_says_where() -> None:
    store = MemoryStore()
    await paused(store, deleting())
    broken = Record(session_id="broken", seq=1, time=1.0, event=UserMessage(text="hi"))
    await store.append("broken", [broken], 0)
    async with Console(store) as console:
        for path, params in (("/session", {"id": "broken"}), ("/", {}), ("/pending", {})):
            query = "&".join(f"{k}={v}" for k, v in params.items())
            response = await console.client.get(f"{path}?{query}")
            assert response.status_code == 422, (path, response.text)
            assert "cannot be read as a session" in response.text
            assert "record seq 1 of session" in response.text  # where it breaks
        assert SID in await console.page("/session", id=SID)  # the other session still shows
