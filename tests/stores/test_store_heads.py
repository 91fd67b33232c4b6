"""A database store's table of sessions takes part in the chain: each session's row keeps its
last seq and head, which the next append chains onto. So ``verify`` checks every row against
the session's records and names a row that disagrees, and an append refuses to chain onto
one: an honest record is never sealed onto a forged head (where verify would then blame it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from events.errors import SessionRowError
from events.integrity import VerifyReport
from events.stores import EventStore, SqliteStore

from tests.stores.conformance.backends import forge_session_row, rec, recs, reopen

KINDS = ["sqlite", "postgres"]  # the stores with a table of sessions
KEYS = {"unkeyed": None, "keyed": b"the host's HMAC key, kept away from the log"}
FORGED_HEAD = "f" * 64

#: forged values of the row, and the seq a writer who believed the row would expect
FORGERIES: list[Any] = [
    pytest.param({"head": FORGED_HEAD}, 3, id="head"),
    pytest.param({"last_seq": 2}, 2, id="seq back"),
    pytest.param({"last_seq": 5}, 5, id="seq on"),
    pytest.param({"last_seq": 2, "head": "seq 2's"}, 2, id="seq and head back"),
    pytest.param({}, 0, id="row removed"),
]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=list(KEYS))
def key(request: pytest.FixtureRequest) -> bytes | None:
    return KEYS[request.param]


async def write(store: EventStore) -> dict[int, str]:
    """Sessions "s" (seqs 1 to 3) and "t" (1 to 2); the head of "s" after each of its seqs."""
    heads: dict[int, str] = {}
    for seq in (1, 2, 3):
        await store.append("s", [rec("s", seq)], expected_seq=seq - 1)
        heads[seq] = next(c.head for c in (await store.verify()).sessions  # type: ignore[attr-defined]
                          if c.session_id == "s")
    await store.append("t", recs("t", 1, 2), expected_seq=0)
    return heads


def names_the_row(report: VerifyReport) -> None:
    broken = report.broken
    assert broken is not None, "verify passed a forged row of the table of sessions"
    assert (broken.line, broken.session_id, broken.seq) == (None, "s", None)
    assert "row in the table of sessions" in broken.problem


@contextlib.asynccontextmanager
async def forged(
    kind: str, tmp_path: Path, key: bytes | None, values: dict[str, Any]
) -> AsyncIterator[EventStore]:
    """A store that wrote sessions "s" and "t" (see :func:`write`); the row of "s" forged."""
    with closing(reopen(kind, tmp_path, key=key)) as store:
        heads = await write(store)
        assert (await store.verify()).ok  # type: ignore[attr-defined]
        if values.get("head") == "seq 2's":
            values = {**values, "head": heads[2]}
        forge_session_row(kind, tmp_path, "s", **values)
        yield store


@pytest.mark.parametrize(("values", "believed"), FORGERIES)
async def test_verify_names_a_forged_row_of_the_table_of_sessions(
    kind: str, key: bytes | None, values: dict[str, Any], believed: int, tmp_path: Path
) -> None:
    async with forged(kind, tmp_path, key, values) as store:
        names_the_row(await store.verify())  # type: ignore[attr-defined]
        names_the_row(await store.verify(session="s"))  # type: ignore[attr-defined]
        assert (await store.verify(session="t")).ok  # type: ignore[attr-defined]


@pytest.mark.parametrize(("values", "believed"), FORGERIES)
async def test_an_append_onto_a_forged_row_is_refused_and_the_row_stays_named(
    kind: str, key: bytes | None, values: dict[str, Any], believed: int, tmp_path: Path
) -> None:
    async with forged(kind, tmp_path, key, values) as first:
        with closing(reopen(kind, tmp_path, key=key)) as second:
            # the store that wrote the session, and another; a writer that knows the session
            # ends at seq 3, and one that believes the row
            for store in (first, second):
                for expected in sorted({3, believed}):
                    with pytest.raises(SessionRowError) as info:
                        await store.append("s", recs("s", expected + 1, expected + 1),
                                           expected_seq=expected)
                    assert info.value.session_id == "s"
                    assert "row in the table of sessions" in str(info.value)
            await second.append("t", [rec("t", 3)], expected_seq=2)  # other sessions go on
            assert await second.read("s") == recs("s", 1, 3)  # nothing was appended
            names_the_row(await second.verify())  # type: ignore[attr-defined]


def test_the_verify_command_names_the_row_and_copy_refuses_the_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli import main

    with closing(reopen("sqlite", tmp_path)) as store:
        trio.run(write, store)
    forge_session_row("sqlite", tmp_path, "s", head=FORGED_HEAD)
    url = f"sqlite:///{tmp_path}/log.db"
    assert main(["verify", url]) == 1
    out = capsys.readouterr().out
    assert "BROKEN" in out and "session s" in out and "row in the table of sessions" in out
    assert main(["copy", url, str(tmp_path / "copy.jsonl"), "--session", "s"]) == 1
    err = capsys.readouterr().err
    assert "'s''s chain does not verify: its row in the table of sessions says" in err


async def test_a_follower_waits_when_the_row_says_more_than_the_records_hold(
    tmp_path: Path
) -> None:
    with closing(SqliteStore(tmp_path / "log.db", poll_interval=0.01)) as store:
        await write(store)
        forge_session_row("sqlite", tmp_path, "s", last_seq=5)
        asked, last_seq = 0, store.last_seq

        async def counted(session_id: str) -> int:
            nonlocal asked
            asked += 1
            assert asked < 1000, "the follower asks again and again, never waiting"
            return await last_seq(session_id)

        store.last_seq = counted  # type: ignore[method-assign]
        seen: list[int] = []

        async def follow() -> None:
            async for record in store.follow("s"):
                seen.append(record.seq)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await trio.testing.wait_all_tasks_blocked()
            assert seen == [1, 2, 3]
            nursery.cancel_scope.cancel()
