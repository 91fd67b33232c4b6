"""What a PostgreSQL store's acknowledged batch survives when the server crashes.

One backend process killed with SIGKILL (what the OOM killer does) makes the postmaster end
every other one, reset shared memory and replay the WAL from disk: whatever the WAL writer had
not written out of shared memory is gone. With ``durable=True`` a batch is acknowledged only
once its commit is written (and, on a server that syncs, flushed), so every acknowledged batch
comes back. ``durable=False`` promises no such thing (it may or may not lose the last
batches in a given run: docs/stores.md says what it was measured to lose).

The test runs on a server of its own (a crash restarts every session of the server), started
like the run's (:func:`tests.pgserver.start`): with ``synchronous_commit=off`` in its own
configuration, so ``durable=True`` must ask for more than the server's setting.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from tests.stores.conformance.backends import recs

psycopg = pytest.importorskip("psycopg")

from events.stores.postgres import PostgresStore  # noqa: E402


@pytest.fixture(scope="module")
def server(postgres_server: Any) -> Iterator[Any]:
    """A server of this module's own (``postgres_server`` says whether one can run here)."""
    from tests import pgserver

    made = pgserver.start()
    try:
        yield made
    finally:
        made.stop()


def kill_a_backend(url: str) -> None:
    """SIGKILL one backend process of the server: the server restarts and recovers."""
    with psycopg.connect(url, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        os.kill(pid, signal.SIGKILL)


def wait_until_back(url: str, patience: float = 120.0) -> None:
    """Connect until the server, recovering, accepts connections again."""
    deadline = time.monotonic() + patience
    while True:
        try:
            with psycopg.connect(url, connect_timeout=10) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # polling a server that tells nobody when it is back


async def test_a_durable_store_keeps_every_acknowledged_batch_through_a_server_crash(
    server: Any,
) -> None:
    url = server.url
    with PostgresStore(url) as setup:
        await setup.init_schema()
    batches = 25
    with PostgresStore(url, durable=True) as store:
        for batch in range(batches):  # each acknowledged: its append returned
            await store.append("s", recs("s", 4 * batch + 1, 4 * batch + 4), 4 * batch)
        await trio.to_thread.run_sync(kill_a_backend, url)
    await trio.to_thread.run_sync(wait_until_back, url)
    with PostgresStore(url) as after:
        assert await after.read("s") == recs("s", 1, 4 * batches)


async def test_durable_raises_a_server_setting_of_off_and_keeps_a_stronger_one(
    server: Any,
) -> None:
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE stronger")
        conn.execute("ALTER DATABASE stronger SET synchronous_commit = remote_apply")
    stronger = server.url_of("stronger")
    for url, durable, expected in [(server.url, True, "on"), (stronger, True, "remote_apply"),
                                   (stronger, False, "off")]:
        with PostgresStore(url, durable=durable) as store:
            await store.init_schema()
            setting = await store._run(
                lambda conn: conn.execute("SHOW synchronous_commit").fetchone()[0])
            assert setting == expected, (url, durable)
