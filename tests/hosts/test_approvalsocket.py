"""A person answers a session's approvals from another process, over the Unix socket of
engine.hosts.approvalsocket: the session's process records every answer, the waiting call goes
on at once, and what the socket refuses leaves the log as it was.

The client's functions block (they are for any program); here they run in a worker thread,
as a trio program would call them."""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
import trio.testing

from engine import (
    LATER,
    Annotations,
    ApprovalNotPending,
    CallNotFound,
    PolicyRules,
    Session,
    SessionClosed,
    ToolResult,
    text,
    tool,
)
from engine.hosts.approvalsocket import pending_approvals, resolve_approval, serve_approvals
from events import MemoryStore
from events.types import ApprovalResolved
from tests.strategies import PROPERTY, annotations as tool_annotations, json_values


@tool(input_schema={"type": "object", "properties": {"title": {"type": "string"}},
                    "required": ["title"]},
      annotations=Annotations(destructive=True))
async def delete_note(call: Any, ctx: Any) -> ToolResult:
    """Delete a note."""
    return ToolResult(content=[text(f"deleted {call.arguments['title']}")])


def later(request: Any) -> Any:
    return LATER


def in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking client function as another program would, without blocking trio."""
    return trio.to_thread.run_sync(partial(fn, *args, **kwargs), abandon_on_cancel=True)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "approvals.sock")


async def test_a_person_lists_what_waits_and_grants_it(path: str) -> None:
    outcomes: list[Any] = []
    async with Session.open(MemoryStore(), tools=[delete_note], approver=later) as session:
        async with serve_approvals(session, path):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # its owner's only
            assert await in_thread(pending_approvals, path) == ()
            with trio.fail_after(30):  # a guard against a hang, not a measurement
                async with await trio.open_unix_socket(path) as asking:
                    await asking.send_all(b'{"op": "pending", "wait": true}\n')
                    await trio.testing.wait_all_tasks_blocked()  # it waits: nothing does yet
                    async with trio.open_nursery() as nursery:
                        async def call() -> None:
                            outcomes.append(
                                await session.call_tool("delete_note", {"title": "todo"}))

                        nursery.start_soon(call)
                        reply = json.loads(await _line_from(asking))
                        [request] = await in_thread(pending_approvals, path, wait=True)
                        assert reply == {"pending": [attrs.asdict(request)]}
                        await in_thread(resolve_approval, path, request.call_id, True)
            assert (request.call_id, request.name, request.arguments) == (
                "h0", "delete_note", {"title": "todo"})
            assert request.annotations == Annotations(destructive=True)
            assert request.origin == "host" and "needs approval" in request.reason
            assert await in_thread(pending_approvals, path) == ()
        assert not os.path.exists(path)  # removed with the block
    [outcome] = outcomes
    assert outcome.result.text == "deleted todo" and not outcome.is_error
    [answer] = [r.event for r in session.records if isinstance(r.event, ApprovalResolved)]
    assert answer.granted and answer.later  # the host's answer, recorded by its process


async def _line_from(stream: trio.SocketStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        assert chunk, "the server hung up"
        data += chunk
    return data


async def test_a_refusal_with_its_reason_and_for_the_session(path: str) -> None:
    async with Session.open(MemoryStore(), tools=[delete_note], approver=later) as session:
        async with serve_approvals(session, path), trio.open_nursery() as nursery:
            results: list[Any] = []

            async def call() -> None:
                results.append(await session.call_tool("delete_note", {"title": "a"}))

            nursery.start_soon(call)
            [request] = await session.wait_pending_approvals()
            await in_thread(resolve_approval, path, request.call_id, False, "session",
                            reason="notes stay")
        again = await session.call_tool("delete_note", {"title": "b"})
    assert results[0].result.text == "delete_note was not approved: notes stay"
    assert again.is_error and "notes stay" in again.result.text  # refused, nobody asked
    assert session.calls["h1"].status == "denied"


async def test_an_answer_to_a_call_that_waits_no_more_is_refused_and_nothing_recorded(
    path: str,
) -> None:
    async with Session.open(MemoryStore(), tools=[delete_note], approver=later) as session:
        async with serve_approvals(session, path):
            with trio.CancelScope() as gave_up:  # its client gave up: the call is cancelled
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.call_tool, "delete_note", {"title": "a"})
                    await session.wait_pending_approvals()
                    gave_up.cancel()
            assert session.calls["h0"].status == "cancelled"
            recorded = len(session.records)
            with pytest.raises(ApprovalNotPending, match="h0 is not waiting.*cancelled"):
                await in_thread(resolve_approval, path, "h0", True)
            with pytest.raises(CallNotFound, match="h9"):
                await in_thread(resolve_approval, path, "h9", True)
            with pytest.raises(ValueError, match="scope"):
                await in_thread(resolve_approval, path, "h0", True, "forever")
            assert len(session.records) == recorded


async def test_bad_requests_and_hang_ups_leave_the_listener_answering(path: str) -> None:
    async with Session.open(MemoryStore(), tools=[delete_note], approver=later) as session:
        async with serve_approvals(session, path):
            for request, says in [(b"not json\n", "one line of JSON"),
                                  (b"[1]\n", "a JSON object"),
                                  (b'{"op": "nap"}\n', "unknown op 'nap'"),
                                  (b'{"op": "resolve", "call_id": 3}\n', 'needs \\"call_id\\"')]:
                reply = await in_thread(_raw, path, request)
                assert b'"error"' in reply and says.encode() in reply
            hung_up = await in_thread(_raw, path, b'{"op": "pending", "wait": true}\n',
                                      hang_up=True)
            assert hung_up == b""  # it waited until the client left, and let go
            assert await in_thread(pending_approvals, path) == ()


def _raw(path: str, request: bytes, *, hang_up: bool = False) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(request)
        if hang_up:
            sock.shutdown(socket.SHUT_WR)  # the end of its side: the server stops waiting
        return sock.recv(65536)


async def test_nobody_at_the_path_says_so(path: str) -> None:
    with pytest.raises(ConnectionError, match="nobody answers approvals at .*--approvals"):
        await in_thread(pending_approvals, path)


async def test_a_path_is_taken_only_when_free_or_left_by_a_dead_process(path: str) -> None:
    async with Session.open(MemoryStore(), tools=[delete_note]) as session:
        Path(path).write_text("a file")
        with pytest.raises(ValueError, match="exists and is not a socket"):
            async with serve_approvals(session, path):
                pass
        os.unlink(path)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)  # nobody listens on it: left behind
        stale.close()
        async with serve_approvals(session, path):
            assert await in_thread(pending_approvals, path) == ()
            with pytest.raises(ValueError, match="another process answers approvals"):
                async with serve_approvals(session, path):
                    pass
            assert await in_thread(pending_approvals, path) == ()  # the first one is kept
        with pytest.raises(ValueError, match="too long for a Unix socket"):
            async with serve_approvals(session, path + "x" * 200):
                pass
        with pytest.raises(ValueError, match="cannot make the approvals socket at .*"
                                             "No such file or directory"):
            async with serve_approvals(session, os.path.join(path + ".d", "a.sock")):
                pass


async def test_waiting_for_approvals_ends_when_the_session_closes() -> None:
    raised: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        async with Session.open(MemoryStore(), tools=[delete_note], approver=later) as session:
            async def wait() -> None:
                try:
                    await session.wait_pending_approvals()
                except SessionClosed as exc:
                    raised.append(exc)

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
    [closed] = raised
    assert "the session is closed" in str(closed)


@PROPERTY
@given(arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
       annotations=tool_annotations(), reason=st.text(max_size=40),
       scope=st.sampled_from(["once", "session"]))
def test_a_request_and_its_answer_cross_the_socket_whole(
    arguments: dict[str, Any], annotations: Annotations, reason: str, scope: str,
) -> None:
    """Whatever a request holds (any JSON arguments, any hints) is listed over the socket as
    the session lists it, and a refusal's reason and scope are recorded as the person sent
    them."""
    @tool(input_schema={"type": "object"}, annotations=annotations)
    async def anything(call: Any, ctx: Any) -> ToolResult:
        """Accept anything."""
        return ToolResult(content=[text("done")])

    async def main(path: str) -> None:
        async with Session.open(MemoryStore(), tools=[anything], approver=later,
                                rules=PolicyRules(ask=["*"])) as session:
            async with serve_approvals(session, path), trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "anything", arguments)
                here = await session.wait_pending_approvals()
                assert await in_thread(pending_approvals, path) == here
                await in_thread(resolve_approval, path, "h0", False, scope, reason=reason)
        [answer] = [r.event for r in session.records if isinstance(r.event, ApprovalResolved)]
        assert (answer.granted, answer.scope, answer.reason) == (False, scope, reason)

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, os.path.join(directory, "a.sock"))
