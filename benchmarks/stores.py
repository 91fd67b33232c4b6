"""Stores: appends per second, one record per append, for each store and durability setting.

The records are the four of a typical call (requested, policy decided, started, completed),
repeated. Each ``append`` is a whole batch: the checks every store makes (shape, seq
conflict), and for the file store the encoding, the read-back check, the hash chain, the
``flock`` and one ``write`` (``fsync`` too when durable). The baselines write the same lines,
already encoded and sealed, with a bare ``os.write`` (and ``os.fsync``); for the memory store,
a bare ``list.append`` of the record.

The SQLite store is measured beside the JSONL store in the same run: one record per append
(its ``BEGIN IMMEDIATE``, one row, ``COMMIT``), and events per second in batches of four (a
call's events, as a session appends them), not durable (``synchronous=NORMAL``) and durable
(``FULL``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence

import attrs
import trio

from events import JsonlStore, MemoryStore, Record, SqliteStore
from events.results import TextContent, ToolResult
from events.integrity import GENESIS
from events.stores.base import EventStore, encode_batch, encode_bodies, seal_lines
from events.types import Event, PolicyDecided, ToolCallCompleted, ToolCallRequested, ToolExecutionStarted

from .harness import Figure, Row, Settings, fmt, interleave, paired
from .workload import ARGS

__all__ = ["encoded_floor", "run", "written_floor"]

#: the floor row under the file store's appends
FLOOR = "a record encoded, proven, sealed and written with an append's system calls, nothing else"


def call_records(session_id: str, count: int) -> list[Record]:
    """``count`` records of one session, the events of one call after another."""
    result = ToolResult(content=(TextContent(text="hello"),), structured_content={"echo": "hello"})
    records = []
    for seq in range(1, count + 1):
        call_id = f"{(seq - 1) // 4 + 1}.0"
        kind = (seq - 1) % 4
        event: Event
        if kind == 0:
            event = ToolCallRequested(call_id=call_id, name="echo", arguments=ARGS,
                                      model_call_id="call_1")
        elif kind == 1:
            event = PolicyDecided(call_id=call_id, decision="allow", reason="read-only")
        elif kind == 2:
            event = ToolExecutionStarted(call_id=call_id)
        else:
            event = ToolCallCompleted(call_id=call_id, result=result)
        records.append(Record(session_id=session_id, seq=seq, time=1_767_225_600.0 + seq,
                              event=event))
    return records


def store_rate(
    make: Callable[[str], EventStore],
    count: int,
    clock: Callable[[], float] = time.perf_counter,
    batch: int = 1,
) -> float:
    """Records per second into a fresh store, appended ``batch`` at a time (with ``batch=1``,
    appends per second)."""
    records = call_records("bench", count - count % batch)
    batches = [tuple(records[i : i + batch]) for i in range(0, len(records), batch)]
    with tempfile.TemporaryDirectory() as directory:
        store = make(os.path.join(directory, "log"))

        async def main() -> float:
            append = store.append
            start = clock()
            for records_ in batches:
                await append("bench", records_, records_[0].seq - 1)
            return clock() - start

        try:
            elapsed = trio.run(main)
        finally:
            store.close()
    return len(records) / elapsed


@contextlib.contextmanager
def _scratch_log() -> Iterator[int]:
    """A descriptor of a new, empty file opened as a ``JsonlStore`` opens its log (appending),
    removed afterwards."""
    with tempfile.TemporaryDirectory() as directory:
        fd = os.open(os.path.join(directory, "log.jsonl"),
                     os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            yield fd
        finally:
            os.close(fd)


def write_rate(count: int, *, durable: bool, clock: Callable[[], float] = time.perf_counter) -> float:
    """Bare ``os.write`` (and ``os.fsync``) of the same sealed lines, per second."""
    lines, _ = encode_batch(call_records("bench", count))
    with _scratch_log() as fd:
        start = clock()
        for line in lines:
            os.write(fd, line)
            if durable:
                os.fsync(fd)
        elapsed = clock() - start
    return count / elapsed


def locked_write_rate(count: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Appends per second of the system calls a ``JsonlStore`` append makes around its
    already sealed line: the lock, the file's size (has another process appended?), the
    ``write``, the unlock."""
    lines, _ = encode_batch(call_records("bench", count))
    with _scratch_log() as fd:
        start = clock()
        for line in lines:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, line)
            fcntl.flock(fd, fcntl.LOCK_UN)
        elapsed = clock() - start
    return count / elapsed


def written_floor(batches: Sequence[Sequence[Record]],
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds to do, for each batch, only what a ``JsonlStore`` append cannot skip: every
    record encoded and proven to read back, the lines sealed into the chain, and the system
    calls around the ``write`` (the lock, the file's size, the unlock); no seq check, no
    index, no event loop. The floor under the file store's appends, and under a call's
    records on it."""
    head = GENESIS
    with _scratch_log() as fd:
        start = clock()
        for batch in batches:
            bodies = encode_bodies(batch)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.lseek(fd, 0, os.SEEK_END)
            lines, head = seal_lines(bodies, head)
            os.write(fd, b"".join(lines))
            fcntl.flock(fd, fcntl.LOCK_UN)
        elapsed = clock() - start
    return elapsed


def encoded_floor(batches: Sequence[Sequence[Record]],
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds to encode every record of ``batches`` and prove it reads back, nothing else:
    what every store that checks encoding does first (``MemoryStore()`` does only that)."""
    start = clock()
    for batch in batches:
        encode_bodies(batch)
    return clock() - start


def list_rate(count: int, clock: Callable[[], float] = time.perf_counter) -> float:
    records = call_records("bench", count)
    kept: list[Record] = []
    start = clock()
    for record in records:
        kept.append(record)
    return count / (clock() - start)


def run(settings: Settings) -> list[Row]:
    fast = settings.size(40_000, 400)
    slow = settings.size(400, 20)
    clock = settings.clock
    plans: list[tuple[str, Callable[[], float], str, Callable[[], float]]] = [
        ("JsonlStore(durable=False)",
         lambda: store_rate(lambda path: JsonlStore(path), fast, clock),
         "os.write of the same lines", lambda: write_rate(fast, durable=False, clock=clock)),
        ("MemoryStore() (checks encoding)",
         lambda: store_rate(lambda _: MemoryStore(), fast, clock),
         "list.append", lambda: list_rate(fast, clock)),
        ("MemoryStore(check_encodable=False)",
         lambda: store_rate(lambda _: MemoryStore(check_encodable=False), fast, clock),
         "list.append", lambda: list_rate(fast, clock)),
        # waiting for the disk is not CPU time: wall time here, whatever the clock
        ("JsonlStore(durable=True)",
         lambda: store_rate(lambda path: JsonlStore(path, durable=True), slow),
         "os.write + os.fsync", lambda: write_rate(slow, durable=True)),
    ]
    plans += [
        ("SqliteStore(durable=False)",
         lambda: store_rate(lambda path: SqliteStore(path), fast, clock),
         "JsonlStore(durable=False)", lambda: store_rate(lambda path: JsonlStore(path), fast,
                                                         clock)),
    ]
    # events per second in batches of four; the commit's wait for the disk is wall time
    batched: list[tuple[str, Callable[[], float], str, Callable[[], float]]] = [
        ("SqliteStore(durable=False), batches of 4",
         lambda: store_rate(lambda path: SqliteStore(path), fast, batch=4),
         "JsonlStore(durable=False), batches of 4",
         lambda: store_rate(lambda path: JsonlStore(path), fast, batch=4)),
        ("SqliteStore(durable=True), batches of 4",
         lambda: store_rate(lambda path: SqliteStore(path, durable=True), slow, batch=4),
         "JsonlStore(durable=True), batches of 4",
         lambda: store_rate(lambda path: JsonlStore(path, durable=True), slow, batch=4)),
    ]
    targets = {"JsonlStore(durable=False)": 250_000,
               "SqliteStore(durable=False), batches of 4": 20_000}
    rows = []
    reps = settings.reps(5, 2)
    for unit, group in (("appends/s", plans), ("events/s", batched)):
        for name, measure, baseline_name, baseline_measure in group:
            ours, theirs = interleave(reps, [measure, baseline_measure])
            figure = Figure(name=name, unit=unit, samples=tuple(ours), better="higher")
            baseline = Figure(name=baseline_name, unit=unit, samples=tuple(theirs),
                              better="higher")
            ratio = paired(figure, baseline, lambda a, b: a / b)
            target = targets.get(name)
            per = "append" if unit == "appends/s" else "event"
            rows.append(Row(group="stores", figure=figure, baseline=baseline,
                            comparison=f"{ratio:.3f}×" if ratio < 0.1 else f"{ratio:.2f}×",
                            note=f"{1e6 / figure.median:.1f} µs per {per}",
                            target=f"≥ {target // 1000} k {unit}" if target else "",
                            met=figure.median >= target if target else None))
    below = floors(fast, reps, clock)
    floor = below[0].figure
    rows = [attrs.evolve(row, floor=f"{fmt(floor.median, floor.unit)} {floor.unit}: {FLOOR}")
            if row.met is False and floor.median < targets[row.figure.name] else row
            for row in rows]
    return rows + below


def floors(count: int, reps: int, clock: Callable[[], float]) -> list[Row]:
    """The floors under ``JsonlStore(durable=False)``'s appends, measured in the same run: a
    record encoded and proven to read back; the system calls of an append; and the two with
    the seal between them, which is all of an append but the store's own bookkeeping."""
    single = [(record,) for record in call_records("bench", count)]
    encoded, written, both = interleave(reps, [
        lambda: count / encoded_floor(single, clock),
        lambda: locked_write_rate(count, clock),
        lambda: count / written_floor(single, clock),
    ])
    encoding = Figure(name="a record encoded and proven to read back, nothing stored",
                      unit="records/s", samples=tuple(encoded), better="higher")
    calls = Figure(name="flock, size, write, unlock of a sealed line, nothing else",
                   unit="appends/s", samples=tuple(written), better="higher")
    floor = Figure(name=FLOOR, unit="appends/s", samples=tuple(both), better="higher")
    return [
        Row(group="stores", figure=floor,
            note=f"{1e6 / floor.median:.1f} µs per append: the floor under "
                 f"JsonlStore(durable=False), all of its append but the store's seq check and "
                 f"index"),
        Row(group="stores", figure=encoding, note=f"{1e6 / encoding.median:.1f} µs per record"),
        Row(group="stores", figure=calls, note=f"{1e6 / calls.median:.1f} µs per append"),
    ]
