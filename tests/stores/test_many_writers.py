"""Many processes writing to one shared log, PostgreSQL and SQLite alike: nothing lost, nothing
duplicated, sequences contiguous; racing writers conflict exactly once per race; a writer
killed in the middle of a batch leaves all of it or none (tests/workers/store_writer.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio

from events.stores import EventStore

from tests.stores.conformance.backends import postgres_url
from tests.workers.store_writer import open_log

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["sqlite", "postgres"]


@pytest.fixture(params=KINDS)
def log(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh shared log: a SQLite file, or a schema of its own on the run's server."""
    if request.param == "postgres":
        request.getfixturevalue("postgres_server")
        return postgres_url(tmp_path)
    return str(tmp_path / "log.db")


def writer(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.workers.store_writer", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def texts(log: str) -> dict[str, list[tuple[int, str]]]:
    """Every session's (seq, text) pairs, through a store."""

    async def main(store: EventStore) -> dict[str, list[tuple[int, str]]]:
        return {session: [(r.seq, getattr(r.event, "text")) for r in await store.read(session)]
                for session in await store.sessions()}

    store = open_log(log)
    try:
        return trio.run(main, store)
    finally:
        store.close()


def test_four_processes_of_250_sessions_each(log: str) -> None:
    workers = [writer("many", log, str(w), "250", "3") for w in range(4)]
    outs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0] * 4 and all("DONE" in o for o in outs)
    found = texts(log)
    assert len(found) == 1_000
    for w in range(4):
        for n in range(250):
            session = f"w{w}-s{n}"
            assert found[session] == [(seq, f"{w} {session} {seq}") for seq in range(1, 13)]


def test_racing_writers_conflict_once_per_race(log: str) -> None:
    sessions, rounds = 50, 3
    workers = [writer("race", log, name, str(sessions), str(rounds)) for name in "ab"]
    for w in workers:  # both go at once
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    outs = [w.communicate(timeout=300)[0].split("\n") for w in workers]
    assert [w.returncode for w in workers] == [0, 0]
    wins = {name: {tuple(line.split()[1:]) for line in out if line.startswith("WON")}
            for name, out in zip("ab", outs)}
    conflicts = sum(int(line.split()[1]) for out in outs for line in out
                    if line.startswith("CONFLICTS"))
    races = {(f"race-{n}", str(r)) for n in range(sessions) for r in range(rounds)}
    # every race has one winner and one loser
    assert wins["a"] | wins["b"] == races and not wins["a"] & wins["b"]
    assert conflicts == len(races)
    # and the log holds each winner's batch, once, in order
    found = texts(log)
    for (session, r) in races:
        winner = "a" if (session, r) in wins["a"] else "b"
        first = 4 * int(r) + 1
        assert found[session][first - 1:first + 3] == [
            (seq, f"{winner} {session} {seq}") for seq in range(first, first + 4)]
    assert Counter(len(v) for v in found.values()) == {4 * rounds: sessions}


def test_a_writer_killed_mid_batch_leaves_all_of_it_or_none(log: str) -> None:
    size = 40
    for _ in range(3):
        proc = writer("kill", log, str(size))
        assert proc.stdout is not None
        acked = 0
        for _ in range(3):  # a few batches (after the last writer's), then kill it mid-batch
            line = proc.stdout.readline()
            assert line.startswith("ACK"), line
            acked = int(line.split()[1])
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        found = texts(log)["k"]
        assert len(found) >= acked and len(found) % size == 0
        assert found == [(seq, f"k k {seq}" + "x" * 10_000) for seq in range(1, len(found) + 1)]
