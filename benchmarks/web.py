"""The web console over big logs: how long its pages take to render.

``python -m benchmarks.web [--quick] [--json | --markdown] [--postgres URL]``:

- the session page of one session of 100 000 model calls (about 700 000 records), on a JSONL
  file, on SQLite and on PostgreSQL: opened by a console that has not read it yet (its
  lifespan running, as ``toolledger web`` runs it), the time until the page is served (the
  session is folded in the background: the page shows its first calls, complete, and says it
  is still reading) and the time until the whole session is folded (the page asked again until
  it no longer says so); then opened again once one more call was recorded (the console reads
  the new records only). Baselines: ``json.loads`` of every line of the same log, read raw;
  and the page of a console that folds the whole session before it renders (no lifespan: how
  every first open went before the background fold), interleaved in the same run.
- the sessions list of 10 000 sessions on SQLite and PostgreSQL, by a console that has not
  read them yet: the first page, and the first page of the ``closed`` filter. Baseline: the
  store's own listing (``store.sessions()``).

Each figure is a request through the console's ASGI app (``httpx.ASGITransport``), wall time.
PostgreSQL is a throwaway server (``tests/pgserver.py``) unless ``--postgres URL`` names one;
without psycopg or the server's binaries its rows are left out, and the heading says why.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import httpx
import trio
from rich.console import Console

from engine import Session, approve_all
from engine.web import console_app, lifespan
from events import JsonlStore, MemoryStore, SqliteStore
from events.stores.base import EventStore
from events.types import Record

from .__main__ import add_run_options, render, show, title
from .databases import add_postgres_option, postgres_url
from .harness import Figure, Row, Settings, interleave, paired
from .report import machine, to_json
from .workload import ScriptModel, echo

__all__ = ["main", "run", "session_records"]

#: The issue's target for every page: under a second.
TARGET = 1.0
#: Records a model call adds after the first (the model turn, its message, the call's four).
PER_CALL = 7


def _template() -> list[Record]:
    """A real session of three model calls, as its records: the block each call repeats."""

    async def main() -> list[Record]:
        store = MemoryStore()
        async with Session.open(store, model=ScriptModel(3), tools=[echo], approver=approve_all,
                                session_id="t", create=True, max_turns=10) as session:
            await session.prompt("go")
        return await store.read("t")

    return trio.run(main)


def session_records(session_id: str, calls: int, template: Sequence[Record] | None = None,
                    *, seq: int = 0, turn: int = 0) -> list[Record]:
    """The records of a session of ``calls`` model calls, one a turn, then a last answer: the
    blocks of a real session's turn repeated with their turn, call ids and seqs renumbered.
    With ``seq``, the records of one more prompt to the session whose last record that is and
    whose last turn was ``turn``."""
    template = list(template or _template())
    head, block, tail = template[:3], template[3:3 + PER_CALL], template[-3:]
    start = time.time()
    out: list[Record] = []

    def add(record: Record, **changes: Any) -> None:
        event = attrs.evolve(record.event, **changes) if changes else record.event
        out.append(Record(session_id=session_id, seq=seq + len(out) + 1,
                          time=start + len(out) / 1e4, event=event))

    for record in head if seq == 0 else head[2:]:  # a later prompt: its user message only
        add(record)
    for n in range(turn + 1, turn + calls + 1):
        for record in block:
            event: Any = record.event
            if hasattr(event, "turn"):
                tool_calls = getattr(event, "tool_calls", None)
                if tool_calls:
                    add(record, turn=n, tool_calls=(attrs.evolve(tool_calls[0], id=f"call_{n}"),))
                else:
                    add(record, turn=n)
            elif hasattr(event, "model_call_id"):
                add(record, call_id=f"{n}.0", model_call_id=f"call_{n}")
            else:
                add(record, call_id=f"{n}.0")
    for record in tail:
        add(record, turn=turn + calls + 1)
    return out


def _write(store: EventStore, records: Sequence[Record], batch: int = 5_000) -> None:
    async def main() -> None:
        for i in range(0, len(records), batch):
            part = records[i:i + batch]
            await store.append(part[0].session_id, part, part[0].seq - 1)

    trio.run(main)


#: What the session's page says while the console still reads its log.
READING = "Still reading this session"


@asynccontextmanager
async def _console(store: EventStore, running: bool = True
                   ) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client of a new console over ``store`` (its lifespan running, as ``toolledger web``
    runs it, unless not ``running``), and the console's token."""
    token = secrets.token_urlsafe()
    app = console_app(store, token=token, read_only=True)
    async with AsyncExitStack() as stack:
        if running:
            await stack.enter_async_context(lifespan(app))
        yield await stack.enter_async_context(httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")), token


async def _first(client: httpx.AsyncClient, token: str, path: str) -> httpx.Response:
    """The first request of a client: with the token, then sent on to ``path``."""
    response = await client.get(path + ("&" if "?" in path else "?") + f"token={token}",
                                follow_redirects=True)
    assert response.status_code == 200, response.text[:500]
    return response


#: How often (seconds) a page that says it is still reading is asked for again. A page comes
#: at once while the fold runs, so asking without a pause would render pages back to back
#: and take the fold's CPU (it measured twice as long that way); a person's page is updated
#: every 0.75 s. The time the whole session takes to fold is known to this much.
AGAIN = 0.25


async def _whole(client: httpx.AsyncClient, path: str, response: httpx.Response) -> None:
    """Ask for the session's page again, every :data:`AGAIN` seconds, until it no longer says
    it is still reading."""
    while READING in response.text:
        await trio.sleep(AGAIN)
        response = await client.get(path)


async def _get(store: EventStore, path: str) -> float:
    """Seconds to serve ``path`` by a new console over ``store`` that folds on the page's
    path (no lifespan: how every console went before the background fold)."""
    async with _console(store, running=False) as (client, token):
        start = time.perf_counter()
        await _first(client, token, path)
        return time.perf_counter() - start


async def _get_twice(store: EventStore, path: str, grow: Callable[[], Any]) -> float:
    """Seconds to serve ``path`` again, by a console that served it once, after ``grow``."""
    async with _console(store) as (client, token):
        await _whole(client, path, await _first(client, token, path))
        await grow()
        start = time.perf_counter()
        response = await client.get(path)
        took = time.perf_counter() - start
    assert response.status_code == 200, response.text[:500]
    return took


async def _open(store: EventStore, path: str) -> tuple[float, float]:
    """Seconds until a new console over ``store``, its lifespan running, serves ``path``, and
    until it has folded the whole session (the page no longer says it is still reading)."""
    async with _console(store) as (client, token):
        start = time.perf_counter()
        response = await _first(client, token, path)
        served = time.perf_counter() - start
        await _whole(client, path, response)
        return served, time.perf_counter() - start


def _row(name: str, samples: Sequence[float], base: Figure, base_name: str,
         target: bool = True) -> Row:
    figure = Figure(name=name, unit="s", samples=tuple(samples))
    ratio = paired(figure, base, lambda a, b: a / b)
    return Row(group="web", figure=figure, baseline=base, comparison=f"{ratio:.2f}× {base_name}",
               target=f"< {TARGET:g} s" if target else "",
               met=figure.median < TARGET if target else None)


def _session_rows(settings: Settings, directory: str, postgres: str | None) -> list[Row]:
    calls = settings.size(100_000, 2_000)
    template = _template()
    records = session_records("big", calls, template)
    path = os.path.join(directory, "big.jsonl")
    # each store's log, and how to make a copy of it that one more call can grow
    logs: dict[str, tuple[Callable[[], EventStore], Callable[[str], EventStore]]] = {
        "JSONL": (lambda: JsonlStore(path), lambda scratch: JsonlStore(_copy(path, scratch))),
        "SQLite": (lambda: SqliteStore(os.path.join(directory, "big.db")),
                   lambda scratch: SqliteStore(_copy(os.path.join(directory, "big.db"),
                                                     scratch))),
    }
    if postgres is not None:
        from events.stores.postgres import PostgresStore

        logs["PostgreSQL"] = (lambda: PostgresStore(postgres), lambda _: PostgresStore(postgres))
    for make, _ in logs.values():
        with make() as store:  # type: ignore[attr-defined]
            _write(store, records)

    def loads() -> float:
        start = time.perf_counter()
        with open(path, "rb") as file:
            for line in file:
                json.loads(line)
        return time.perf_counter() - start

    rows = []
    reps = settings.reps(3, 2)
    grown = 0  # PostgreSQL's log is grown in place: two more turns each time
    for name, (make, copy) in logs.items():
        opened: list[tuple[float, float]] = []

        def cold(m: Callable[[], EventStore] = make) -> float:
            with m() as store:  # type: ignore[attr-defined]
                opened.append(trio.run(_open, store, "/session?id=big"))
            return opened[-1][0]

        def whole(m: Callable[[], EventStore] = make) -> float:
            with m() as store:  # type: ignore[attr-defined]
                return trio.run(_get, store, "/session?id=big")

        def again(c: Callable[[str], EventStore] = copy, in_place: bool = name == "PostgreSQL"
                  ) -> float:
            nonlocal grown
            turn = calls + 1 + 2 * grown  # the last turn of the log grown
            grown += in_place
            with tempfile.TemporaryDirectory() as scratch, c(scratch) as store:  # type: ignore[attr-defined]
                async def grow() -> None:
                    seq = await store.last_seq("big")
                    await store.append("big", session_records("big", 1, template, seq=seq,
                                                              turn=turn), seq)

                return trio.run(_get_twice, store, "/session?id=big", grow)

        served, before, theirs = interleave(reps, [cold, whole, loads])
        base = Figure(name=f"json.loads of the log's {len(records):,} lines", unit="s",
                      samples=tuple(theirs))
        folded = Figure(name="the page, the whole session folded before it renders", unit="s",
                        samples=tuple(before))
        head = f"session page, {calls:,} calls, {name}"
        rows.append(_row(f"{head}: first open, page served", served, folded,
                         "folded first"))
        rows.append(_row(f"{head}: first open, whole session folded",
                         [complete for _, complete in opened], base, "json.loads", False))
        rows.append(_row(f"{head}: again, after one more call",
                         [again() for _ in range(reps)], base, "json.loads"))
    return rows


def _copy(path: str, scratch: str) -> str:
    """A copy of the log at ``path`` in the folder ``scratch``: its path."""
    copy = os.path.join(scratch, os.path.basename(path))
    with open(path, "rb") as source, open(copy, "wb") as target:
        target.write(source.read())
    return copy


def _list_rows(settings: Settings, directory: str, postgres: str | None) -> list[Row]:
    count = settings.size(10_000, 200)
    template = _template()
    sessions = [session_records(f"s{n:05d}", 1, template) for n in range(count)]
    stores: dict[str, Callable[[], EventStore]] = {
        "SQLite": lambda: SqliteStore(os.path.join(directory, "many.db"))}
    if postgres is not None:
        from events.stores.postgres import PostgresStore

        stores["PostgreSQL"] = lambda: PostgresStore(postgres)
    rows = []
    reps = settings.reps(3, 2)
    for name, make in stores.items():
        with make() as store:  # type: ignore[attr-defined]
            async def fill(s: EventStore = store) -> None:
                for records in sessions:
                    await s.append(records[0].session_id, records, 0)

            trio.run(fill)

        def listing(m: Callable[[], EventStore] = make) -> float:
            with m() as store:  # type: ignore[attr-defined]
                async def timed() -> float:
                    start = time.perf_counter()
                    await store.sessions()
                    return time.perf_counter() - start

                return trio.run(timed)

        base_samples: list[float] = []
        for path, what in (("/?page=0", "first page"), ("/?state=closed", "closed only")):
            def page(m: Callable[[], EventStore] = make, p: str = path) -> float:
                with m() as store:  # type: ignore[attr-defined]
                    return trio.run(_get, store, p)

            ours, theirs = interleave(reps, [page, listing])
            base_samples += theirs
            base = Figure(name=f"{name}: store.sessions() of {count:,}", unit="s",
                          samples=tuple(theirs))
            rows.append(_row(f"sessions list, {count:,} sessions, {name}: {what}", ours, base,
                             "the listing"))
    return rows


def run(settings: Settings, postgres: str | None) -> list[Row]:
    """The table's rows; PostgreSQL's only with a ``postgres`` URL."""
    with tempfile.TemporaryDirectory() as directory:
        return [*_session_rows(settings, directory, postgres),
                *_list_rows(settings, directory, postgres)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser)
    add_postgres_option(parser)
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render, as_markdown=args.markdown)
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name="wall")
    started = time.perf_counter()
    with postgres_url(args.postgres) as (url, absent), \
            Console(stderr=True).status("timing the console's pages…"):
        rows = run(settings, url)
    took = time.perf_counter() - started
    facts = {"quick": args.quick, "clock": "wall", "seconds": round(took, 1),
             "postgres": absent or "measured"}
    if args.json:
        json.dump(to_json(rows, settings=facts), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    heading = title(machine(), quick=args.quick, seconds=took) + (f"; {absent}" if absent else "")
    show(rows, heading, as_markdown=args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
