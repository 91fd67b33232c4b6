"""Which thread waits for the disk while a non-durable SQLite store appends: counted, not timed.

``python -m benchmarks.walsyncs {store,inline} [BATCHES]`` appends ``BATCHES`` (3 000) batches
of four to one session of a new ``SqliteStore()`` (``store``) or of the same store with
SQLite's own checkpoints in its inline commits (``inline``,
:class:`benchmarks.dbcalls.InlineCheckpoints`), and prints the event loop's thread id. Run
under ``strace -f -e trace=fdatasync,fsync -o OUT``: the lines of ``OUT`` that begin with that
id are the syncs the event loop waited for. A count does not depend on the machine's load,
where the time of a stall does (docs/performance.md, "The database paths, second round").
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading

import trio

from events import SqliteStore

from .dbcalls import InlineCheckpoints
from .stores import call_records

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ("store", "inline"):
        print(__doc__, file=sys.stderr)
        return 2
    batches = int(args[1]) if len(args) > 1 else 3_000
    make = SqliteStore if args[0] == "store" else InlineCheckpoints
    records = call_records("s", 4 * batches)
    print(f"event loop thread {threading.get_native_id()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="walsyncs-") as directory:
        store = make(os.path.join(directory, "log.db"))
        try:
            async def append() -> None:
                for first in range(0, len(records), 4):
                    await store.append("s", records[first : first + 4], first)

            trio.run(append)
        finally:
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
