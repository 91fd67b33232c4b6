"""A session's page stays live: the console sends it again over server-sent events, from the
store's ``follow``, when the session records a new call."""

from __future__ import annotations

from typing import Any

import trio

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from tests.web.webconsole import SID, Console, Tools


async def events(app: Any, token: str, query: bytes,
                 chunks: trio.MemorySendChannel[str]) -> None:
    """Call the console's ``/events`` as a server would, handing each body chunk on."""
    gone = trio.Event()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": "/events", "raw_path": b"/events",
             "root_path": "", "query_string": query, "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 80),
             "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode())]}

    async def receive() -> dict[str, Any]:
        await gone.wait()  # the browser stays until the test is done
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            assert (b"content-type", b"text/event-stream; charset=utf-8") in message["headers"]
        elif message.get("body"):
            await chunks.send(message["body"].decode())

    await app(scope, receive, send)


async def test_a_new_call_is_sent_to_the_open_page() -> None:
    store = MemoryStore()
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_text("hello")]), tools=tools.specs,
                            approver=approve_all, session_id=SID, create=True) as session:
        await session.prompt("hi")
    after = await store.last_seq(SID)
    console = Console(store)
    send, receive = trio.open_memory_channel[str](100)
    with trio.fail_after(60):  # a page that never updates fails, not hangs
        await watch(console, send, receive, tools, store, after)
    assert tools.ran == [("delete_file", {"path": "later.md"})]


async def watch(console: Console, send: trio.MemorySendChannel[str],
                receive: trio.MemoryReceiveChannel[str], tools: Tools, store: MemoryStore,
                after: int) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(events, console.app, console.token,
                           f"view=session&id={SID}&after={after}".encode(), send)
        assert (await receive.receive()).startswith("retry:")
        model = FauxModel([faux_tool_call("delete_file", {"path": "later.md"}),
                           faux_text("done")])
        async with Session.open(store, model=model, tools=tools.specs, approver=approve_all,
                                session_id=SID) as session:
            await session.prompt("delete later.md")
        seen = ""
        while "deleted later.md" not in seen:  # the page as the finished call left it
            chunk = await receive.receive()
            assert chunk.startswith("event: update\n")
            assert "delete_file" in chunk
            seen = chunk
        nursery.cancel_scope.cancel()
