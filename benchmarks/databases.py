"""The shared stores, SQLite and PostgreSQL, beside the JSONL file in one run.

``python -m benchmarks.databases [--quick] [--json | --markdown] [--postgres URL] [--group
rates|calls ...]``: events per second (group ``rates``) in batches of four (a call's events, as a session appends them), for one writer
(one session, one task) and for eight sessions appended to at once by eight tasks on one store
object, each store not durable and durable. Each figure's baseline is the JSONL store with the
same durability and the same writers, measured in the same run. Group ``calls``: one tool
call through ``Session.call_tool`` on each database, and the store's share of it
(:mod:`benchmarks.dbcalls`).

PostgreSQL is a throwaway server started from the machine's binaries with the server's
default settings (``tests/pgserver.py``; ``fsync`` on), on loopback, unless ``--postgres URL``
names one; its tables are made in the schema ``toolledger_bench``. Without psycopg or the
binaries its rows are left out, and the heading says why.

What each durability setting promises is in docs/stores.md ("Durability").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio
from rich.console import Console

from events import JsonlStore, SqliteStore
from events.stores.base import EventStore

from .__main__ import add_run_options, render, show, title
from .harness import Figure, Row, Settings, interleave, paired
from .report import machine, to_json
from .stores import call_records

__all__ = ["main", "run"]

WRITERS = {"one writer": 1, "8 sessions": 8}
# the issue's targets, events per second, for the stores' defaults (not durable)
TARGETS = {
    "SqliteStore(durable=False), one writer": 20_000,
    "PostgresStore(durable=False), one writer": 5_000,
    "PostgresStore(durable=False), 8 sessions": 10_000,
}


def events_rate(make: Callable[[str], EventStore], count: int, writers: int) -> float:
    """Events per second appended to a new store object in batches of four by ``writers``
    tasks, each to a session of its own (``count`` events in all); wall time, from once each
    writer has read its session's last seq (a database store has its connections then)."""
    per_writer = max(count // writers // 4 * 4, 4)
    runs = uuid.uuid4().hex[:8]  # a session of its own each time, for the shared databases
    batches = [
        [tuple(records[i : i + 4]) for i in range(0, per_writer, 4)]
        for records in (call_records(f"bench-{runs}-{w}", per_writer) for w in range(writers))
    ]
    with tempfile.TemporaryDirectory() as directory:
        store = make(os.path.join(directory, "log"))

        async def write(mine: list[tuple[Any, ...]]) -> None:
            for batch in mine:
                await store.append(batch[0].session_id, batch, batch[0].seq - 1)

        async def main() -> float:
            async with trio.open_nursery() as nursery:  # connections made before the clock
                for mine in batches:
                    nursery.start_soon(store.last_seq, mine[0][0].session_id)
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for mine in batches:
                    nursery.start_soon(write, mine)
            return time.perf_counter() - start

        try:
            elapsed = trio.run(main)
        finally:
            store.close()
    return writers * per_writer / elapsed


def postgres_maker(url: str, durable: bool) -> Callable[[str], EventStore]:
    from events.stores.postgres import PostgresStore

    return lambda _: PostgresStore(url, durable=durable)


def run(settings: Settings, postgres: str | None) -> list[Row]:
    """The table's rows; PostgreSQL's only with a ``postgres`` URL."""
    rows: list[Row] = []
    reps = settings.reps(5, 2)
    for durable in (False, True):
        count = settings.size(8_000, 160) if not durable else settings.size(800, 64)
        makers: dict[str, Callable[[str], EventStore]] = {
            "SqliteStore": lambda path, d=durable: SqliteStore(path + ".db", durable=d)}
        if postgres is not None:
            makers["PostgresStore"] = postgres_maker(postgres, durable)
        for writers_name, writers in WRITERS.items():
            def jsonl(path: str, d: bool = durable) -> EventStore:
                return JsonlStore(path + ".jsonl", durable=d)

            def baseline_measure(w: int = writers, n: int = count) -> float:
                return events_rate(jsonl, n, w)

            baseline_name = f"JsonlStore(durable={durable}), {writers_name}"
            for store_name, make in makers.items():
                name = f"{store_name}(durable={durable}), {writers_name}"

                def measure(m: Callable[[str], EventStore] = make, w: int = writers,
                            n: int = count) -> float:
                    return events_rate(m, n, w)

                ours, theirs = interleave(reps, [measure, baseline_measure])
                figure = Figure(name=name, unit="events/s", samples=tuple(ours), better="higher")
                baseline = Figure(name=baseline_name, unit="events/s", samples=tuple(theirs),
                                  better="higher")
                ratio = paired(figure, baseline, lambda a, b: a / b)
                target = TARGETS.get(name)
                rows.append(Row(group="databases", figure=figure, baseline=baseline,
                                comparison=f"{ratio:.2f}×",
                                note=f"{1e6 / figure.median:.1f} µs per event",
                                target=f"≥ {target // 1000} k events/s" if target else "",
                                met=figure.median >= target if target else None))
    return rows


def add_postgres_option(parser: argparse.ArgumentParser) -> None:
    """``--postgres URL``: measure that database instead of a throwaway server."""
    parser.add_argument("--postgres", metavar="URL",
                        help="a PostgreSQL database with the store's tables (toolledger db "
                             "init URL) to measure, instead of a throwaway server")


@contextmanager
def postgres_url(given: str | None) -> Iterator[tuple[str | None, str | None]]:
    """The database to measure, and why there is none: ``given``, or a throwaway server's
    (its tables in a schema of their own), stopped when the block ends."""
    if given:
        yield given, None
        return
    server, absent = start_postgres()
    try:
        yield (f"{server.url}?options=-csearch_path%3Dtoolledger_bench" if server else None,
               absent)
    finally:
        if server is not None:
            server.stop()


def start_postgres() -> tuple[Any, str | None]:
    """A throwaway server with the server's defaults and the store's tables, or why not."""
    try:
        import psycopg

        from events.stores import pgschema
        from tests import pgserver
    except ImportError as exc:
        return None, f"PostgreSQL left out: {exc}"
    try:
        server = pgserver.start(fast=False)
    except pgserver.ServerUnavailable as exc:
        return None, f"PostgreSQL left out: {str(exc).splitlines()[0]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA toolledger_bench")
        conn.execute("SET search_path TO toolledger_bench")
        pgschema.init_schema(conn, server.url)
    return server, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.databases", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser)
    add_postgres_option(parser)
    parser.add_argument("--group", nargs="+", choices=("rates", "calls"),
                        default=["rates", "calls"], help="run only these groups")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.render:
        return render(args.render, as_markdown=args.markdown)
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name="wall")
    started = time.perf_counter()
    with postgres_url(args.postgres) as (url, absent), \
            Console(stderr=True).status("timing the stores…"):
        rows = run(settings, url) if "rates" in args.group else []
        if "calls" in args.group:
            from . import dbcalls

            rows += dbcalls.run(settings, url)
    took = time.perf_counter() - started
    about = machine()
    facts = {"quick": args.quick, "repeat": args.repeat, "clock": "wall",
             "seconds": round(took, 1), "postgres": absent or "measured"}
    if args.json:
        json.dump(to_json(rows, settings=facts), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    heading = title(about, quick=args.quick, seconds=took) + (f"; {absent}" if absent else "")
    show(rows, heading, as_markdown=args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
