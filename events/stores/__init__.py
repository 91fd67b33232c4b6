"""Where sessions' records are kept: the :class:`EventStore` contract and its backends.

:class:`MemoryStore` keeps records in the process (tests, embedding); :class:`JsonlStore`
keeps them in one JSON Lines file (the embedded default); :class:`SqliteStore` in one
SQLite database that several processes of one machine share. :func:`open_store` opens the one
a URL names (``sqlite:///runs.db``, ``postgresql://...``, a plain path for a JSONL file).
:func:`read_jsonl` reads such a file without opening a store, for the CLI.
``events.stores.postgres.PostgresStore`` keeps them in a PostgreSQL database that processes on
many machines share; it is imported from its own module, since it needs the ``postgres`` extra
(psycopg).
"""

from __future__ import annotations

from .base import EventStore
from .jsonl import JsonlStore, read_jsonl
from .memory import MemoryStore
from .sqlite import SqliteStore
from .urls import open_store

__all__ = ["EventStore", "JsonlStore", "MemoryStore", "SqliteStore", "open_store", "read_jsonl"]
