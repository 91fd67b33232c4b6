"""A PostgreSQL statement sent and awaited on the event loop's thread, with no thread hop.

psycopg's async connection runs on asyncio only, so the PostgreSQL store runs its statements
in worker threads; each costs a hop to a thread and back on top of the round trip. The
statement of an append whose session's head the store knows (a new session's first, and
every one after an append this store made) runs here instead: psycopg's own execute generator, the code
its synchronous ``Cursor.execute`` runs, with its waits for the connection's socket made by
trio (:func:`trio.lowlevel.wait_readable`), so the loop runs other tasks while the server
works, and the statement's parameters, preparation and errors are psycopg's own.

The generator is psycopg's private ``_execute_gen`` (the one its sync and async cursors both
run), so it is a dependency on psycopg's inside: :func:`supported` says whether this psycopg
is one of the releases it was tested with (:data:`TESTED`) and has it, and the store uses the
thread for every statement otherwise: a newer psycopg is slower here, never wrong. A statement once sent is finished whatever happens to the
task (its wait is shielded), as a worker thread's statement is.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
import trio
import trio.lowlevel
from psycopg.waiting import Ready, Wait

from .pgappend import Appender, Connection, Pending

__all__ = ["TESTED", "append", "execute", "supported"]

Cursor = psycopg.Cursor[tuple[Any, ...]]


#: The psycopg releases (major.minor) whose private execute generator this was tested with.
TESTED = ("3.2", "3.3")


def supported(version: str = psycopg.__version__) -> bool:
    """Whether this psycopg is a release :data:`TESTED` and its cursor has the execute
    generator :func:`execute` drives: a private API may change its meaning in any release."""
    release = ".".join(version.split(".")[:2])
    return release in TESTED and callable(getattr(psycopg.Cursor, "_execute_gen", None))


#: whether an append's statement is sent from the event loop (else always from a thread)
ON_LOOP = supported()


async def append(appender: Appender, conn: Connection, pending: Pending) -> bool:
    """A batch whose head the store knows, in its one statement sent from the event loop;
    whether it is settled (stored). Anything else (a head to read, a conflict, an error) is
    left to the worker thread's :meth:`Appender.append`, which decides it exactly as it
    always has: a statement that did not store the batch stored nothing of it."""
    prev = appender.known(pending) if pending.records and ON_LOOP else None
    if prev is None:
        return False
    query, params, head = appender.statement(pending, prev)
    try:
        cursor = await execute(conn, query, params)
    except psycopg.Error:
        return False
    if not appender.stored(pending, cursor.rowcount, head):
        return False
    pending.error = None
    return True


async def execute(conn: Connection, query: str, params: dict[str, object]) -> Cursor:
    """``conn.execute(query, params)`` from the event loop, waiting for the server with trio;
    shielded from cancellation once begun."""
    cursor = conn.cursor()
    with trio.CancelScope(shield=True), conn.lock:
        gen = cursor._execute_gen(query, params)
        fileno = conn.pgconn.socket
        try:
            wait = next(gen)
            while True:
                wait = gen.send(await _ready(fileno, wait))
        except StopIteration:
            pass
    return cursor


async def _ready(fileno: int, wait: int) -> int:
    """Wait until the socket is ready for what psycopg asks (read, write, or either)."""
    if wait == Wait.R:
        await trio.lowlevel.wait_readable(fileno)
        return Ready.R
    if wait == Wait.W:
        await trio.lowlevel.wait_writable(fileno)
        return Ready.W
    readable, writable, _ = select.select([fileno], [fileno], [], 0)
    if readable or writable:
        return (Ready.R if readable else 0) | (Ready.W if writable else 0)
    ready: list[int] = []
    async with trio.open_nursery() as nursery:
        async def first(waiter: Any, flag: int) -> None:
            await waiter(fileno)
            ready.append(flag)
            nursery.cancel_scope.cancel()

        nursery.start_soon(first, trio.lowlevel.wait_readable, Ready.R)
        nursery.start_soon(first, trio.lowlevel.wait_writable, Ready.W)
    return ready[0]
