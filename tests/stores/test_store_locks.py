"""Who owns a session, and waiting for a store's locks without stopping the host's loop.

A lock "held elsewhere" is held through another open file description of the log (in a thread
of the test, standing for another process: ``flock`` cannot tell them apart). The thread lets
go when a task of the loop tells it to, so the test proves the loop ran while the lock was
held; if the loop were frozen, the thread gives up after a while and the order is wrong.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from engine import Session
from engine.models import FauxModel, faux_text
from events import JsonlStore, MemoryStore, SessionInUse
from events.stores import EventStore
from events.stores import jsonl as jsonl_module
from events.stores import locks
from events.types import Record, UserMessage
from tests.stores.lockholder import PATIENCE, HeldElsewhere, other_task

def rec(seq: int, session: str = "s") -> Record:
    return Record(session_id=session, seq=seq, time=1.0 + seq, event=UserMessage(text=f"#{seq}"))


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "log.jsonl"
    JsonlStore(path).close()
    yield path


async def test_a_lock_held_elsewhere_does_not_stop_the_loop_while_an_append_waits(
    log: Path,
) -> None:
    order: list[str] = []
    with JsonlStore(log) as store:
        held = HeldElsewhere(log)
        try:
            async def append() -> None:
                await store.append("s", [rec(1)], 0)
                order.append("appended")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(append)
                nursery.start_soon(other_task, order, held)
        finally:
            held.join()
        assert order == ["another task ran", "appended"]
        assert [r.seq for r in await store.read("s")] == [1]


async def test_a_session_waiting_for_a_lock_held_elsewhere_leaves_the_loop_running(
    log: Path,
) -> None:
    order: list[str] = []
    with JsonlStore(log) as store:
        async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="s",
                                create=True) as session:
            held = HeldElsewhere(log)
            try:
                async def prompt() -> None:
                    await session.prompt("go")
                    order.append("prompt returned")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    nursery.start_soon(other_task, order, held)
            finally:
                held.join()
        assert order == ["another task ran", "prompt returned"]
        assert len(await store.read("s")) == len(session.records)


async def test_a_wait_for_a_lock_held_elsewhere_can_be_cancelled_and_writes_nothing(
    log: Path,
) -> None:
    with JsonlStore(log) as store:
        held = HeldElsewhere(log)
        try:
            with trio.CancelScope() as scope:
                async def cancel() -> None:
                    await trio.testing.wait_all_tasks_blocked()
                    scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel)
                    await store.append("s", [rec(1)], 0)
            assert scope.cancelled_caught
        finally:
            held.join()
        assert await store.read("s") == []
        await store.append("s", [rec(1)], 0)  # the store goes on: the lock was let go
        assert [r.seq for r in await store.read("s")] == [1]


async def test_a_durable_append_syncs_off_the_loop(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    go = threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:  # a disk that takes its time
        go.wait(PATIENCE)
        real_fsync(fd)

    with JsonlStore(log, durable=True) as store:
        monkeypatch.setattr(jsonl_module.os, "fsync", slow_fsync)

        async def append() -> None:
            await store.append("s", [rec(1)], 0)
            order.append("appended")

        async def other() -> None:
            await trio.testing.wait_all_tasks_blocked()
            order.append("another task ran")
            go.set()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(append)
                nursery.start_soon(other)
        finally:
            go.set()
        assert order == ["another task ran", "appended"]


# -- one owner per session ----------------------------------------------------------------


@pytest.fixture(params=["byte", "lock file"] if locks.BYTE_CLAIMS else ["lock file"])
def claims(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a JSONL log's sessions are claimed: a byte of the log (where the system has OFD
    locks), and the lock files of the systems without them, forced here too."""
    monkeypatch.setattr(locks, "BYTE_CLAIMS", request.param == "byte")
    return str(request.param)


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path, claims: str) -> Iterator[EventStore]:
    made: Any = MemoryStore() if request.param == "memory" else JsonlStore(tmp_path / "log.jsonl")
    yield made
    made.close()


def test_a_claimed_session_is_refused_until_its_claim_ends(store: EventStore) -> None:
    claim = store.claim("s")
    with pytest.raises(SessionInUse, match="'s' is in use"):
        store.claim("s")
    with store.claim("t"):  # other sessions are free
        pass
    claim.release()
    claim.release()  # once is enough; again does nothing
    with store.claim("s"):
        pass


async def test_a_session_open_twice_at_once_is_refused_and_nothing_is_written(
    store: EventStore,
) -> None:
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="s",
                            create=True) as session:
        await session.prompt("go")
        before = await store.read("s")
        with pytest.raises(SessionInUse, match="'s' is in use"):
            async with Session.open(store, model=FauxModel([]), session_id="s"):
                pass
        assert await store.read("s") == before
    async with Session.open(store, model=FauxModel([]), session_id="s") as session:
        assert (await session.resume()).stop == "end_turn"  # free again once the block ended


def test_two_jsonl_stores_on_one_file_share_the_claims(tmp_path: Path, claims: str) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlStore(path) as first, JsonlStore(path) as second:
        with first.claim("s"):
            with pytest.raises(SessionInUse, match="held by this process"):
                second.claim("s")
        with second.claim("s"):
            pass
    assert sorted(os.listdir(tmp_path)) == ["log.jsonl"]  # no lock file is left behind


HOLD = """
import sys
from events import JsonlStore
with JsonlStore(sys.argv[1]) as store, store.claim("s"):
    print("HELD", flush=True)
    sys.stdin.readline()
"""


def test_a_session_another_process_holds_is_refused_until_it_lets_go(
    tmp_path: Path, claims: str
) -> None:
    path = tmp_path / "log.jsonl"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    code = HOLD if claims == "byte" else "from events.stores import locks\n" \
        "locks.BYTE_CLAIMS = False\n" + HOLD
    holder = subprocess.Popen([sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "HELD"
        with JsonlStore(path) as store:
            where = "held by another process" if claims == "byte" else \
                f"held by process {holder.pid}"
            with pytest.raises(SessionInUse, match=where):
                store.claim("s")
            with store.claim("t"):  # other sessions are free
                pass
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(timeout=30) == 0
            with store.claim("s"):  # free once the holder is gone
                pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.skipif(not locks.BYTE_CLAIMS, reason="claims by a byte of the log need OFD locks")
def test_two_ids_that_share_a_lock_byte_are_never_both_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks, "claim_byte_offset", lambda session_id: 1 << 62)
    with JsonlStore(tmp_path / "log.jsonl") as first, JsonlStore(tmp_path / "log.jsonl") as second:
        with first.claim("a"):
            with pytest.raises(SessionInUse, match="held by session 'a' of this process"):
                second.claim("b")
        with second.claim("b"):
            pass


def byte_locked(path: Path, session_id: str) -> bool:
    """Whether another open file description would be refused the claim byte of
    ``session_id`` (as another process would be)."""
    probe = os.open(path, os.O_RDWR)
    try:
        asked = fcntl.fcntl(probe, fcntl.F_OFD_GETLK, locks._FLOCK.pack(
            fcntl.F_WRLCK, os.SEEK_SET, locks.claim_byte_offset(session_id), 1, 0))
    finally:
        os.close(probe)
    return bool(locks._FLOCK.unpack(asked)[0] != fcntl.F_UNLCK)


@pytest.mark.skipif(not locks.BYTE_CLAIMS, reason="claims by a byte of the log need OFD locks")
def test_a_stores_byte_claims_end_when_it_closes(log: Path) -> None:
    store = JsonlStore(log)
    claim = store.claim("s")
    assert byte_locked(log, "s")
    claim.release()
    assert not byte_locked(log, "s")
    claim = store.claim("s")
    store.close()  # the claims go with the store's descriptor
    assert not byte_locked(log, "s")
    with JsonlStore(log) as other, pytest.raises(SessionInUse, match="held by this process"):
        other.claim("s")  # until the claim is released
    claim.release()  # through no descriptor: the store's is closed
    with JsonlStore(log) as other, other.claim("s"):
        assert byte_locked(log, "s")


@pytest.mark.skipif(not locks.BYTE_CLAIMS, reason="claims by a byte of the log need OFD locks")
def test_a_read_only_store_claims_the_same_bytes(log: Path) -> None:
    with JsonlStore(log) as writer, JsonlStore(log, read_only=True) as reader:
        with reader.claim("s"):
            assert byte_locked(log, "s")
            with pytest.raises(SessionInUse, match="held by this process"):
                writer.claim("s")
        assert not byte_locked(log, "s")
        with writer.claim("s"), pytest.raises(SessionInUse, match="held by this process"):
            reader.claim("s")
    assert not byte_locked(log, "s")


@pytest.mark.skipif(not locks.BYTE_CLAIMS, reason="claims by a byte of the log need OFD locks")
def test_a_read_only_store_whose_file_was_replaced_claims_nothing(log: Path) -> None:
    with JsonlStore(log, read_only=True) as reader:
        os.replace(log, log.with_suffix(".old"))
        JsonlStore(log).close()  # another file under the name now
        with pytest.raises(OSError, match="no longer the file this store opened"):
            reader.claim("s")
    assert not byte_locked(log, "s")


@pytest.mark.skipif(not locks.BYTE_CLAIMS, reason="claims by a byte of the log need OFD locks")
def test_a_log_whose_locks_meet_the_claims_bytes_is_claimed_by_lock_files(tmp_path: Path) -> None:
    """As on NFS, where Linux emulates ``flock`` with a byte-range lock over the whole file:
    a claim's byte lock would meet it, and appends would wait for the claims forever."""
    path = tmp_path / "log.jsonl"
    path.touch()
    whole = os.open(path, os.O_RDONLY)
    try:  # a read lock over the whole file, from byte 0 to its end and beyond
        fcntl.fcntl(whole, fcntl.F_OFD_SETLK,
                    locks._FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
        with JsonlStore(path) as store:
            with store.claim("s"):
                assert os.listdir(tmp_path / "log.jsonl.owners")  # the session's lock file
                with pytest.raises(SessionInUse, match="held by this process"):
                    store.claim("s")
    finally:
        os.close(whole)
    with JsonlStore(path) as store, store.claim("s"):  # nothing meets the bytes now
        assert sorted(os.listdir(tmp_path)) == ["log.jsonl"]
