"""A model provider on loopback: an HTTP server that answers with recorded API payloads.

The official SDKs talk to it through their ``base_url``, so the adapters are tested with the
SDKs' own request building, retries, timeouts, streaming and errors, and no network. Each
test gives the server a script of :class:`Reply`\\ s, one per HTTP request in order (the
SDK's retries included), and reads back the requests it got (:attr:`ReplayServer.requests`).

Payloads are files under ``tests/models/payloads/<api>/``: ``.json`` bodies as the API
documents its responses, ``.sse`` streams as it documents its server-sent events.
``Reply.stall_after`` sends only the first events of a stream and then holds the connection
open until the client drops it (a stream cancelled half-way); ``Reply.hang`` never answers (a
timeout). Every response closes its connection, so one request is one connection, unless the
server keeps connections alive (``keep_alive=True``) as a provider's does: then the client's
pool keeps them open between requests. :func:`serving_in_thread` serves from a thread of its
own, for a test whose client runs on asyncio.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

PAYLOADS = Path(__file__).parent / "payloads"
_REASONS = {200: "OK", 400: "Bad Request", 429: "Too Many Requests",
            500: "Internal Server Error", 529: "Overloaded"}


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stall_after: int | None = None
    hang: bool = False


def payload(api: str, name: str, *, status: int = 200, stall_after: int | None = None,
            headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    """The recorded payload ``name`` of ``api`` (``name.json`` or ``name.sse``) as a reply."""
    json_file = PAYLOADS / api / f"{name}.json"
    if json_file.exists():
        return Reply(status=status, body=json_file.read_bytes(), headers=headers)
    return Reply(status=status, body=(PAYLOADS / api / f"{name}.sse").read_bytes(),
                 content_type="text/event-stream", stall_after=stall_after, headers=headers)


class ReplayServer:
    """Answers each request with the next reply of its script; records the requests."""

    def __init__(self, replies: Sequence[Reply], *, keep_alive: bool = False) -> None:
        self._replies = list(replies)
        self._keep_alive = keep_alive
        #: ``{"method", "path", "json"}`` of every request, in order.
        self.requests: list[dict[str, Any]] = []
        #: how many connections clients opened
        self.connections = 0
        #: set when a client dropped a stalled stream
        self.dropped = trio.Event()
        #: set when a request met a ``hang`` reply (a thread's event: any loop may wait on it)
        self.hanging = threading.Event()
        self.url = ""

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests, in order."""
        return [request["json"] for request in self.requests]

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            while await self._answer(stream) and self._keep_alive:
                pass

    async def _answer(self, stream: trio.SocketStream) -> bool:
        """Answer one request; whether the connection may take another."""
        head, body = await _read_request(stream)
        if head is None:
            return False
        method, path = head
        self.requests.append({"method": method, "path": path,
                              "json": json.loads(body) if body else None})
        if not self._replies:
            await _respond(stream, Reply(status=500, body=b'{"error": "script ended"}'),
                           self._keep_alive)
            return True
        reply = self._replies.pop(0)
        if reply.hang:
            self.hanging.set()
            await _until_closed(stream)
            return False
        if reply.stall_after is None:
            await _respond(stream, reply, self._keep_alive)
            return True
        events = reply.body.split(b"\n\n")
        await _respond(stream, attrs.evolve(
            reply, body=b"\n\n".join(events[:reply.stall_after]) + b"\n\n"), False)
        await _until_closed(stream)
        self.dropped.set()
        return False


async def _read_request(stream: trio.SocketStream) -> tuple[tuple[str, str] | None, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some()
        if not chunk:
            return None, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = await stream.receive_some()
        if not chunk:
            break
        body += chunk
    return (method, path), body


async def _respond(stream: trio.SocketStream, reply: Reply, keep_alive: bool) -> None:
    lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}",
             f"content-type: {reply.content_type}",
             f"connection: {'keep-alive' if keep_alive else 'close'}",
             *(f"{name}: {value}" for name, value in reply.headers)]
    if reply.stall_after is None:
        lines.append(f"content-length: {len(reply.body)}")
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body)


async def _until_closed(stream: trio.SocketStream) -> None:
    try:
        while await stream.receive_some():
            pass
    except trio.BrokenResourceError:
        pass


@asynccontextmanager
async def serving(replies: Sequence[Reply], *,
                  keep_alive: bool = False) -> AsyncIterator[ReplayServer]:
    """A :class:`ReplayServer` listening on 127.0.0.1 while the block runs; with
    ``keep_alive`` it keeps each connection open for the client's next request, as a
    provider's server does."""
    server = ReplayServer(replies, keep_alive=keep_alive)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server._handle, 0,
                                                host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        server.url = f"http://127.0.0.1:{port}"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()


@contextmanager
def serving_in_thread(replies: Sequence[Reply], *,
                      keep_alive: bool = False) -> Iterator[ReplayServer]:
    """:func:`serving`, in a thread that runs trio for it while the block runs: for a client
    on another event loop (asyncio) in this thread. Read the server's records after the
    block."""
    started = threading.Event()
    found: list[tuple[ReplayServer, trio.lowlevel.TrioToken, trio.Event]] = []

    async def serve() -> None:
        stop = trio.Event()
        async with serving(replies, keep_alive=keep_alive) as server:
            found.append((server, trio.lowlevel.current_trio_token(), stop))
            started.set()
            await stop.wait()

    def run() -> None:
        try:
            trio.run(serve)
        finally:
            started.set()

    thread = threading.Thread(target=run, name="replay-server")
    thread.start()
    started.wait()
    if not found:
        thread.join()
        raise RuntimeError("the replay server did not start")
    server, token, stop = found[0]
    try:
        yield server
    finally:
        trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join()
