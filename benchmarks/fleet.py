"""Sessions across worker processes (engine.hosts.dbos) beside the same work in one process.

    PYTHONPATH=. python -m benchmarks.fleet [--quick] [--sessions N] [--postgres URL]

Every session is the fleet test's (tests/workers/fleet_worker.py): a prompt whose first turn
asks for two calls, one of them approved by a person, a second turn asking for a third call
approved by a person, and a last turn that ends; three steps (the prompt, then each answer
applied and the session resumed), each opening the session on PostgreSQL and closing it. The
answers are sent with the prompt, so no session waits for a person: what is timed is the
machinery.

- **sessions per second**: ``--sessions`` sessions started at once, until the last has
  finished, with 1, 2 and 4 worker processes (DBOS workflows, four steps at a time per
  worker), beside the same steps run by four threads of one process, without DBOS.
- **added latency per step**: one session at a time, from its start to its result, divided by
  its three steps, beside the same three steps in one process: what DBOS's queue, its
  recorded steps and its messages add to each step.
- **the store's share**: in the one-process run, the part of a step spent in the store
  (opening it, its claim, reads and appends, closing it), timed around each of its methods.

A throwaway PostgreSQL server with its default (durable) settings is started, unless
``--postgres URL`` names a database (one is created on it per run).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.hosts.dbos import SessionWorker, answer, apply_answers, prompt_or_resume, start
from events.stores.postgres import PostgresStore
from tests.fleet import Fleet, new_database
from tests.workers.fleet_worker import APPROVED_BY_PERSON, FleetModel, tools

MS = 1e3


class StoreClock:
    """The time a process's steps spend in their stores, summed across threads."""

    def __init__(self) -> None:
        self.by_kind: dict[str, float] = {}
        self._lock = threading.Lock()

    @property
    def seconds(self) -> float:
        return sum(self.by_kind.values())

    @contextmanager
    def timing(self, kind: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.by_kind[kind] = self.by_kind.get(kind, 0.0) + time.perf_counter() - began

    def store(self, url: str) -> PostgresStore:
        """A store whose every call is timed on this clock."""
        clock = self

        class Timed(PostgresStore):
            async def append(self, *args: Any, **kwargs: Any) -> Any:
                with clock.timing("append"):
                    return await super().append(*args, **kwargs)

            async def read(self, *args: Any, **kwargs: Any) -> Any:
                with clock.timing("read"):
                    return await super().read(*args, **kwargs)

            def claim(self, session_id: str) -> Any:
                with clock.timing("claim"):
                    return super().claim(session_id)

            def close(self) -> None:
                with clock.timing("close"):
                    super().close()

        with self.timing("open"):
            return Timed(url, connections=1)


def in_one_process(url: str, runs: Path, sessions: list[str], threads: int,
                   clock: StoreClock) -> float:
    """The three steps of each session, by ``threads`` threads of this process: seconds."""
    worker = SessionWorker(lambda: clock.store(url), lambda session_id: FleetModel(),
                           tools(runs), slots=threads)
    grant = [{"call_id": call_id, "granted": True} for call_id in APPROVED_BY_PERSON]

    def session(session_id: str) -> None:
        worker.run(session_id, functools.partial(prompt_or_resume, "go"))
        worker.run(session_id, functools.partial(apply_answers, grant[:1]))
        worker.run(session_id, functools.partial(apply_answers, grant[1:]))

    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(session, sessions))
    return time.perf_counter() - began


def in_the_fleet(client: Any, sessions: list[str]) -> float:
    """Start every session with its answers, wait for each to finish: seconds."""
    began = time.perf_counter()
    for session_id in sessions:
        start(client, session_id, "go")
        for call_id in APPROVED_BY_PERSON:
            answer(client, session_id, call_id, True)
    for session_id in sessions:
        outcome = client.retrieve_workflow(session_id).get_result(polling_interval_sec=0.005)
        assert outcome["text"] == "done", outcome
    return time.perf_counter() - began


def ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{n}" for n in range(count)]


def measure(url: str, sessions: int, one_at_a_time: int, sizes: list[int],
            say: Callable[[str], None]) -> list[tuple[str, str, str]]:
    from dbos import DBOSClient

    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        runs = Path(folder) / "runs"
        runs.mkdir()
        clock = StoreClock()
        alone = [in_one_process(url, runs, [f"a{n}"], 1, clock) / 3
                 for n in range(one_at_a_time)]
        total = sum(alone) * 3
        share = f"store: {clock.seconds / total:.0%}: " + ", ".join(
            f"{kind} {seconds / total:.0%}" for kind, seconds in
            sorted(clock.by_kind.items(), key=lambda item: -item[1]))
        one = in_one_process(url, runs, ids("p", sessions), 4, StoreClock())
        rows.append(("one process, 4 threads, no DBOS", f"{sessions / one:.1f}",
                     f"{statistics.median(alone) * MS:.1f} ms ({share})"))
        say(f"one process: {sessions / one:.1f} sessions/s")
        for size in sizes:
            fleet = Fleet(url, runs, size)
            client = DBOSClient(system_database_url=url, system_database_pool_size=4)
            try:
                latency = [in_the_fleet(client, [f"l{size}.{n}"]) / 3
                           for n in range(one_at_a_time)]
                took = in_the_fleet(client, ids(f"w{size}.", sessions))
            finally:
                fleet.stop()
                client.destroy()
            added = statistics.median(latency) - statistics.median(alone)
            rows.append((f"{size} worker process{'es' if size > 1 else ''} (DBOS)",
                         f"{sessions / took:.1f}",
                         f"{statistics.median(latency) * MS:.1f} ms (+{added * MS:.1f} ms)"))
            say(f"{size} workers: {sessions / took:.1f} sessions/s")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a few sessions, 1 and 2 workers: checks that everything runs")
    parser.add_argument("--sessions", type=int, default=200,
                        help="sessions started at once, per row (200)")
    parser.add_argument("--postgres", metavar="URL",
                        help="a server to use instead of a throwaway one")
    args = parser.parse_args(argv)
    sessions, one_at_a_time, sizes = ((4, 1, [1, 2]) if args.quick
                                      else (args.sessions, 15, [1, 2, 4]))

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    load = os.getloadavg()[0]
    server = None
    if args.postgres is None:
        from tests import pgserver
        server = pgserver.start(fast=False)
    try:
        url = new_database(args.postgres or server.url)  # type: ignore[union-attr]
        rows = measure(url, sessions, one_at_a_time, sizes, say)
    finally:
        if server is not None:
            server.stop()
    print(f"{sessions} sessions of 3 steps each (a prompt, two answers), PostgreSQL; "
          f"{os.cpu_count()} cores, load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print("| how | sessions per second | one session alone, per step |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
