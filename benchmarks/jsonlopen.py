"""Opening a big JSONL log: the store's opening scan, against reading the file.

``python -m benchmarks.jsonlopen [--quick] [--clock cpu] [--json | --markdown]``: the log of
``benchmarks.web`` (one session of 100 000 model calls, some 700 000 lines, 190 MB), opened
by a read-only :class:`~events.stores.JsonlStore` as ``toolledger web`` opens it. Baselines,
each sample of each in turn in one process: reading the file's lines and nothing else;
``json.loads`` of every line; and ``read_jsonl``, which decodes every line with the codec and
checks its seq, as the opening scan did before it indexed lines by their envelopes alone.
Then the time from opening the store to the session's page served by a console over it (its
lifespan running, as ``toolledger web`` runs it: ``benchmarks.web``'s first open, with the
store's opening counted), against the issue's target of a second; and, on the wall clock, from
starting ``toolledger web`` on the log to that page served (the command's imports and its
server counted too).
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable

import trio

from events import JsonlStore
from events.stores.jsonlines import read_jsonl

from .__main__ import command
from .harness import Figure, Row, Settings, interleave, paired
from .web import READING, TARGET, _console, _first, _template, _write, session_records

__all__ = ["main", "run"]


def _lines(path: str) -> None:
    with open(path, "rb") as file:
        for _ in file:
            pass


def _loads(path: str) -> None:
    with open(path, "rb") as file:
        for line in file:
            json.loads(line)


def _opened(path: str) -> None:
    JsonlStore(path, read_only=True).close()


async def _served(store: JsonlStore, clock: Callable[[], float], page: str) -> float:
    """Seconds until a new console over ``store``, its lifespan running, serves ``page``
    (leaving then: the background fold and check are cancelled)."""
    async with _console(store) as (client, token):
        start = clock()
        await _first(client, token, page)
        return clock() - start


def _page(path: str, clock: Callable[[], float], page: str = "/session?id=big") -> float:
    """Seconds from opening the store to ``page`` served by a new console."""
    start = clock()
    with JsonlStore(path, read_only=True) as store:
        opened = clock() - start
        return opened + trio.run(_served, store, clock, page)


def run(settings: Settings) -> list[Row]:
    """The table's rows: the opening scan against each baseline, and the console's page."""
    calls = settings.size(100_000, 2_000)
    records = session_records("big", calls, _template())
    clock = settings.clock
    lines = len(records)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "big.jsonl")
        with JsonlStore(path) as store:
            _write(store, records)
        # Free them: millions of live objects that every collection during a sample would
        # walk again (an opening then measured 1.2-8.8 s, median 7.5, instead of some 1 s).
        del records

        def timed(what: Callable[[str], object]) -> Callable[[], float]:
            def measure() -> float:
                start = clock()
                what(path)
                return clock() - start
            return measure

        opened, read, loads, decoded, page, listed, started = interleave(
            settings.reps(5, 2), [
                timed(_opened), timed(_lines), timed(_loads), timed(read_jsonl),
                lambda: _page(path, clock), lambda: _page(path, clock, "/"),
                lambda: _started(path)])
    figure = Figure(name=f"open a JsonlStore on the {calls:,}-call log ({lines:,} lines)",
                    unit="s", samples=tuple(opened))
    rows = []
    for samples, name in ((read, "read the file's lines, nothing else"),
                          (loads, "json.loads of every line"),
                          (decoded, "read_jsonl: every line decoded by the codec (the former "
                                    "opening scan's work)")):
        base = Figure(name=name, unit="s", samples=tuple(samples))
        ratio = paired(figure, base, lambda a, b: a / b)
        rows.append(Row(group="jsonl open", figure=figure, baseline=base,
                        comparison=f"{ratio:.2f}×"))
    served = Figure(name="open the store, then the session page served by a new console",
                    unit="s", samples=tuple(page))
    rows.append(Row(group="jsonl open", figure=served, target=f"< {TARGET:g} s",
                    met=served.median < TARGET))
    # the list checks its rows' chains: in a file, a check of any session reads the file
    shown = Figure(name="open the store, then the sessions list served by a new console",
                   unit="s", samples=tuple(listed))
    rows.append(Row(group="jsonl open", figure=shown, target=f"< {TARGET:g} s",
                    met=shown.median < TARGET))
    rows.append(Row(group="jsonl open", figure=Figure(
        name="start `toolledger web` on the log, then its session page served (wall clock: "
             "the command's imports, the store's opening, the server, the page)",
        unit="s", samples=tuple(started))))
    return rows


def _started(path: str) -> float:
    """Wall seconds from starting ``toolledger web LOG`` (a new process) to the session's
    page served to a client that opened the URL the command printed."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "engine.cli", "web", path, "--port", "0", "--read-only"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        try:
            assert process.stderr is not None
            url = next(found.group(0) for line in process.stderr
                       if (found := re.search(r"http://\S+", line)))
            base, _, token = url.partition("/?")
            opener = urllib.request.build_opener(
                urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
            with opener.open(f"{base}/session?id=big&{token}") as response:
                assert READING in response.read().decode() or response.status == 200
            return time.perf_counter() - start
        finally:
            process.terminate()


def main(argv: list[str] | None = None) -> int:
    return command("python -m benchmarks.jsonlopen", __doc__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
