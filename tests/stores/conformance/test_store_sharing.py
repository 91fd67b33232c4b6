"""One log, many users: claims, readers running beside a writer, stale store objects and
processes, and a key that refuses a forged record however it was written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from events.errors import ConflictError, SessionInUse, UnverifiedRecordError
from events.stores import EventStore
from events.types import UserMessage

from tests.stores.conformance.backends import SHARED, forge_row, make_store, rec, recs, reopen, store


# -- claims --------------------------------------------------------------------------------


def test_a_session_has_one_owner(store: EventStore) -> None:
    claim = store.claim("s")
    with pytest.raises(SessionInUse):
        store.claim("s")
    with store.claim("other"):  # another session is free
        pass
    claim.release()
    claim.release()  # again: a no-op
    with store.claim("s"):  # free again
        with pytest.raises(SessionInUse):
            store.claim("s")


@pytest.mark.parametrize("kind", SHARED)
def test_a_claim_holds_against_another_store_on_the_same_log(kind: str, tmp_path: Path) -> None:
    with closing(make_store(kind, tmp_path)) as first, closing(reopen(kind, tmp_path)) as second:
        with first.claim("s"):
            with pytest.raises(SessionInUse):
                second.claim("s")
        with second.claim("s"):
            pass


@pytest.mark.parametrize("kind", SHARED)
def test_a_claim_holds_against_another_process(kind: str, tmp_path: Path) -> None:
    make_store(kind, tmp_path).close()
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from events.errors import SessionInUse
        from tests.stores.conformance.backends import reopen
        store = reopen({kind!r}, Path({str(tmp_path)!r}))
        try:
            store.claim("s")
        except SessionInUse:
            sys.exit(3)
        sys.exit(0)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    with closing(make_store(kind, tmp_path)) as store, store.claim("s"):
        held = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    free = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    assert (held.returncode, free.returncode) == (3, 0)


# -- concurrent readers, several store objects on one log ----------------------------------


@pytest.mark.trio
async def test_concurrent_readers_see_whole_batches_in_order(
    store: EventStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["store"]
    others = [reopen(kind, tmp_path) for _ in range(2)] if kind in SHARED else []
    readers = [store, *others]
    last_reads: list[list[int]] = []  # each reader task's read begun after the last append
    written = trio.Event()

    async def read_until_done(reader: EventStore) -> None:
        while True:
            done = written.is_set()
            records = await reader.read("s")
            seqs = [r.seq for r in records]
            assert seqs == list(range(1, len(seqs) + 1))  # a prefix, nothing missing
            assert len(seqs) % 4 == 0  # whole batches only
            if done:
                last_reads.append(seqs)
                return
            await trio.lowlevel.checkpoint()

    try:
        async with trio.open_nursery() as nursery:
            for reader in readers:
                for _ in range(2):
                    nursery.start_soon(read_until_done, reader)
            for batch in range(25):
                await store.append("s", recs("s", 4 * batch + 1, 4 * batch + 4), 4 * batch)
                await trio.lowlevel.checkpoint()
            written.set()
        assert len(last_reads) == 2 * len(readers)
        assert all(len(s) == 100 for s in last_reads)
        for other in others:
            assert await other.last_seq("s") == 100
            assert await other.sessions() == ["s"]
    finally:
        for other in others:
            other.close()


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_stale_store_on_the_same_log_conflicts(kind: str, tmp_path: Path) -> None:
    with closing(make_store(kind, tmp_path)) as first, closing(reopen(kind, tmp_path)) as second:
        await first.append("s", recs("s", 1, 2), expected_seq=0)
        with pytest.raises(ConflictError):
            await second.append("s", [rec("s", 1)], expected_seq=0)
        await second.append("s", [rec("s", 3)], expected_seq=2)
        assert await first.read("s") == recs("s", 1, 3)
    with closing(reopen(kind, tmp_path)) as third:
        assert await third.read("s") == recs("s", 1, 3)


# -- keyed integrity -----------------------------------------------------------------------

KEY = b"the host's HMAC key, kept away from the log"


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
@pytest.mark.parametrize("forger_key", [None, b"another key"], ids=["unkeyed", "wrong key"])
async def test_a_keyed_store_refuses_a_forged_record(
    kind: str, forger_key: bytes | None, tmp_path: Path
) -> None:
    with closing(reopen(kind, tmp_path, key=KEY)) as store:
        await store.append("s", recs("s", 1, 3), expected_seq=0)
        assert store.keyed and await store.read("s") == recs("s", 1, 3)
        forged = rec("s", 2, UserMessage(text="s #X"))  # as long as the real one
        forge_row(kind, tmp_path, forged, key=forger_key)
        for after in (0, 1):  # reading from the start, and from just before it
            with pytest.raises(UnverifiedRecordError) as info:
                await store.read("s", after=after)
            assert (info.value.session_id, info.value.seq) == ("s", 2)
        with pytest.raises(UnverifiedRecordError) as info:  # seq 3 no longer links to it
            await store.read("s", after=2)
        assert info.value.seq == 3
    # the same forgery, seen by a store opened afterwards
    with pytest.raises(UnverifiedRecordError):
        with closing(reopen(kind, tmp_path, key=KEY)) as again:
            await again.read("s")


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_keyed_store_never_chains_onto_a_forged_record(kind: str, tmp_path: Path) -> None:
    with closing(reopen(kind, tmp_path, key=KEY)) as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
    forge_row(kind, tmp_path, rec("s", 2, UserMessage(text="s #X")), key=None)
    with pytest.raises(UnverifiedRecordError):
        with closing(reopen(kind, tmp_path, key=KEY)) as store:
            await store.append("s", [rec("s", 3)], expected_seq=2)
    with closing(reopen(kind, tmp_path)) as plain:  # nothing was appended after it
        assert await plain.last_seq("s") == 2
