"""The SQLite store's group commit: appends that wait share a transaction, each batch fails
alone, and cancellation never loses or half-writes a batch."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from events.errors import ConflictError
from events.stores import SqliteStore
from events.stores.groupcommit import Batch, GroupCommit

from tests.stores.conformance.backends import rec, recs


@pytest.fixture
def groups(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The sessions of each group the stores commit, in order."""
    seen: list[list[str]] = []
    commit = GroupCommit._commit

    def spy(self: GroupCommit, conn: sqlite3.Connection, group: list[Batch]) -> None:
        seen.append([batch.session_id for batch in group])
        commit(self, conn, group)

    monkeypatch.setattr(GroupCommit, "_commit", spy)
    return seen


class Gates:
    """Holds each group's transaction until the test opens its gate; ``arrived[i]`` is set
    when group ``i`` reaches its gate."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gates = [threading.Event() for _ in range(4)]
        self.arrived = [trio.Event() for _ in range(4)]
        self.calls = 0
        commit = GroupCommit._commit

        def gated(store: GroupCommit, conn: sqlite3.Connection, group: list[Batch]) -> None:
            gate = self.gates[self.calls]
            trio.from_thread.run_sync(self.arrived[self.calls].set)
            self.calls += 1
            assert gate.wait(60), "a gate the test never opened"
            commit(store, conn, group)

        monkeypatch.setattr(GroupCommit, "_commit", gated)

    def open(self, index: int) -> None:
        self.gates[index].set()


async def test_waiting_appends_share_transactions(tmp_path: Path, groups: list[list[str]]) -> None:
    with SqliteStore(tmp_path / "log.db", durable=True) as store:
        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(store.append, f"s{n}", recs(f"s{n}", 1, 4), 0)
        for n in range(8):
            assert await store.read(f"s{n}") == recs(f"s{n}", 1, 4)
    assert sorted(sum(groups, [])) == [f"s{n}" for n in range(8)]
    assert len(groups) < 8  # the batches queued behind the first were written together


async def test_a_conflict_fails_its_batch_alone(tmp_path: Path, groups: list[list[str]]) -> None:
    outcomes: dict[str, str] = {}

    async def append(name: str, session: str) -> None:
        try:
            await store.append(session, recs(session, 1, 2), expected_seq=0)
            outcomes[name] = "stored"
        except ConflictError:
            outcomes[name] = "conflict"

    with SqliteStore(tmp_path / "log.db", durable=True) as store:
        async with trio.open_nursery() as nursery:
            for name, session in [("a", "first"), ("b", "same"), ("c", "same"), ("d", "last")]:
                nursery.start_soon(append, name, session)
        assert sorted(outcomes.values()) == ["conflict", "stored", "stored", "stored"]
        assert outcomes["a"] == outcomes["d"] == "stored"
        assert await store.read("same") == recs("same", 1, 2)
        assert sorted(await store.sessions()) == ["first", "last", "same"]
    assert any(len(group) > 1 for group in groups)


async def test_cancelled_before_its_group_begins_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = Gates(monkeypatch)
    with SqliteStore(tmp_path / "log.db", durable=True) as store:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append, "leader", recs("leader", 1, 1), 0)
            await gates.arrived[0].wait()  # the leader's group is being written
            with trio.CancelScope() as scope:
                scope.cancel()
                await store.append("queued", recs("queued", 1, 1), 0)
            assert scope.cancelled_caught
            gates.open(0)
        assert await store.sessions() == ["leader"]
        gates.open(1)
        await store.append("queued", recs("queued", 1, 1), 0)  # the store goes on
    assert gates.calls == 2


async def test_cancelled_once_taken_is_written_whole_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch another appender's group has taken is written even if its own task is
    cancelled meanwhile, and its append returns normally, so that its writer knows it is
    stored (a session would otherwise queue it again); the cancellation lands after it."""
    gates = Gates(monkeypatch)
    returned = []
    with SqliteStore(tmp_path / "log.db", durable=True) as store:

        async def cancelled_append(scope: trio.CancelScope) -> None:
            with scope:
                await store.append("taken", recs("taken", 1, 2), 0)
                returned.append(True)
                await trio.lowlevel.checkpoint()
                returned.append(False)  # never: the cancellation lands here

        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append, "first", recs("first", 1, 1), 0)
            await gates.arrived[0].wait()  # group 1 = [first], held
            nursery.start_soon(store.append, "second", recs("second", 1, 1), 0)
            await trio.testing.wait_all_tasks_blocked()
            scope = trio.CancelScope()
            nursery.start_soon(cancelled_append, scope)
            await trio.testing.wait_all_tasks_blocked()
            gates.open(0)  # group 2 = [second, taken] begins, and is held
            await gates.arrived[1].wait()
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            gates.open(1)
        assert returned == [True] and scope.cancelled_caught
        assert await store.read("taken") == recs("taken", 1, 2)
        assert sorted(await store.sessions()) == ["first", "second", "taken"]


async def test_closing_lets_the_group_being_written_finish_and_no_other_begin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gates = Gates(monkeypatch)
    failed: list[BaseException] = []
    store = SqliteStore(tmp_path / "log.db", durable=True)

    async def append_after_close() -> None:
        try:
            await store.append("late", [rec("late", 1)], expected_seq=0)
        except ValueError as exc:
            failed.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store.append, "leader", recs("leader", 1, 1), 0)
        await gates.arrived[0].wait()
        nursery.start_soon(append_after_close)
        await trio.testing.wait_all_tasks_blocked()
        store.close()
        gates.open(0)
    assert len(failed) == 1 and "closed" in str(failed[0])
    with SqliteStore(tmp_path / "log.db") as again:
        assert await again.sessions() == ["leader"]
