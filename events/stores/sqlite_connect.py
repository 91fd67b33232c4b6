"""Opening an SQLite store's database: the file, made owner-only, and connections set up
for WAL (see :mod:`events.stores.sqlite`)."""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from urllib.parse import quote

from .modes import open_creating

__all__ = ["connect", "create_file"]


def connect(
    path: str, timeout: float, *, durable: bool, waits: bool = True, read_only: bool = False
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are begun explicitly), set up with WAL;
    one that does not ``waits`` gets ``SQLITE_BUSY`` at once from a lock held elsewhere; a
    ``read_only`` one can neither write nor create the file."""
    if read_only:
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        return sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=timeout,
                               isolation_level=None, check_same_thread=False)
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        _use_wal(conn, timeout)
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        if not waits:
            conn.execute("PRAGMA busy_timeout=0")
    except BaseException:
        conn.close()
        raise
    return conn


def create_file(path: str) -> None:
    """Make the database file owner-only if it is missing (see :mod:`events.stores.modes`):
    SQLite would make it through the umask, and its ``-wal`` and ``-shm`` files take the
    database's mode. A file that is there is left as it is."""
    try:
        os.close(open_creating(path, os.O_RDONLY))
    except OSError:
        pass  # no folder, a folder of that name: SQLite's own open fails too, and says why


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the database in WAL mode (a no-op once it is: the mode is kept in the file).

    Switching needs a lock SQLite does not wait for with its busy handler: several processes
    opening a new database at once get ``SQLITE_BUSY`` at once. So the switch is tried again,
    briefly, until ``timeout`` has passed, as a busy handler would have."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.001)
