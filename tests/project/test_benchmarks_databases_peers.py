"""The database benchmarks run and print a row for each figure (no timing is asserted): the
``stores`` group of ``python -m benchmarks.peers`` (toolledger's database stores beside the
``eventsourcing`` library's recorders) and the ``calls`` group of ``python -m
benchmarks.databases``. Both start PostgreSQL and the first spawns writing processes, a minute
or two on a busy machine, so they are marked slow: ``pytest -m slow`` runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*command: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", *command, "--quick", "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.slow
def test_the_stores_group_times_eventsourcing_beside_toolledger() -> None:
    pytest.importorskip("eventsourcing")
    pytest.importorskip("psycopg_pool")
    result = _run("benchmarks.peers", "--only", "toolledger", "eventsourcing",
                  "--group", "stores")
    rows = result["rows"]
    names = [(row["figure"]["name"], row["baseline"]["name"]) for row in rows]
    expected = [
        ("toolledger SqliteStore(durable=True), one writer",
         "eventsourcing SQLiteApplicationRecorder, one writer"),
        ("toolledger SqliteStore(durable=True), 8 processes",
         "eventsourcing SQLiteApplicationRecorder, 8 processes"),
        ("toolledger PostgresStore(durable=True), one writer",
         "eventsourcing PostgresApplicationRecorder, one writer"),
        ("toolledger PostgresStore(durable=True), 8 processes",
         "eventsourcing PostgresApplicationRecorder, 8 processes"),
    ]
    assert names == expected[:len(names)] and len(names) in (2, 4)  # PostgreSQL if it can
    assert "eventsourcing" in result["settings"]["versions"]
    for row in rows:
        assert row["comparison"].endswith("× eventsourcing")
        assert all(value > 0 for value in row["figure"]["samples"] + row["baseline"]["samples"])
        # the targets are SQLite's
        assert (row["target"] != "") == ("Sqlite" in row["figure"]["name"])


@pytest.mark.slow
def test_the_calls_group_times_a_call_on_each_database() -> None:
    pytest.importorskip("psycopg")
    rows = _run("benchmarks.databases", "--group", "calls")["rows"]
    names = [row["figure"]["name"] for row in rows]
    assert names[:2] == ["Session.call_tool on SqliteStore()",
                         "a call's two appends on SqliteStore(), nothing else"]
    assert names[-1] == "Session.call_tool on MemoryStore()"
    assert rows[0]["baseline"]["name"].endswith("SQLite's checkpoints inline")
    assert rows[0]["target"] == "≤ 80 µs"
    if len(rows) == 5:  # PostgreSQL's throwaway server could start
        assert names[2] == "Session.call_tool on PostgresStore()"
        assert rows[2]["baseline"]["name"].endswith("every statement in a worker thread")
        assert rows[2]["target"] == "≤ 300 µs"
