"""Naming a store in one string: a URL, or a plain path for a JSONL file.

=====================================  ==============================================
``runs.jsonl``, ``/var/log/runs.jsonl``  :class:`~events.stores.JsonlStore` on that file
``jsonl://runs.jsonl``                   the same, said explicitly (the path as written)
``sqlite:///runs.db``                    :class:`~events.stores.SqliteStore`, relative path
``sqlite:////var/db/runs.db``            the same, absolute path (a fourth slash)
``postgresql://user@host/db``            ``PostgresStore`` (extra ``postgres``), the URL
                                         handed to psycopg as it is
``memory:``                              a new, empty :class:`~events.stores.MemoryStore`
=====================================  ==============================================

The SQLite form is SQLAlchemy's: ``sqlite://`` then the host, which is empty, then ``/`` and
the path; percent-escapes in a path are decoded (``%20`` for a space). ``postgres://`` is
taken for ``postgresql://``, as libpq takes it. A string that begins with some other
``scheme://`` is refused rather than taken for a file name. The scheme table is
:data:`SCHEMES`; the PostgreSQL store is imported only when a URL names it, so the core
needs no database driver.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from urllib.parse import unquote

import attrs

from .base import EventStore
from .jsonl import JsonlStore
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["SCHEMES", "StoreURL", "open_store", "parse_store_url"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


@attrs.frozen(kw_only=True)
class StoreURL:
    """What a store URL names: the ``kind`` of store (a key of :data:`SCHEMES`) and its
    ``target``, a file's path or, for PostgreSQL, the connection URL."""

    kind: str
    target: str


def parse_store_url(url_or_path: str) -> StoreURL:
    """What ``url_or_path`` names (see the module docstring); ``ValueError`` saying what is
    wrong for an unknown scheme or a URL without a path."""
    if url_or_path == "memory:":
        return StoreURL(kind="memory", target="")
    match = _SCHEME.match(url_or_path)
    if match is None:
        return StoreURL(kind="jsonl", target=url_or_path)
    scheme, rest = match.group(1).lower(), url_or_path[match.end():]
    if scheme == "jsonl":
        path = unquote(rest)
    elif scheme == "sqlite":
        if not rest.startswith("/"):
            raise ValueError(
                f"{url_or_path!r}: a SQLite URL is sqlite:/// then the path (sqlite:///runs.db "
                f"for runs.db here, sqlite:////var/db/runs.db for an absolute path)")
        path = unquote(rest[1:])
    elif scheme in ("postgresql", "postgres"):
        return StoreURL(kind="postgresql", target=url_or_path)
    else:
        known = ", ".join(f"{name}://" for name in SCHEMES if name != "memory")
        raise ValueError(f"{url_or_path!r}: unknown store URL scheme {scheme}:// (known: "
                         f"{known}, memory:, or a plain path for a JSONL file)")
    if not path:
        raise ValueError(f"{url_or_path!r} names no file")
    return StoreURL(kind=scheme, target=path)


def _jsonl(target: str, key: bytes | None, read_only: bool) -> EventStore:
    return JsonlStore(target, key=key, read_only=read_only)


def _sqlite(target: str, key: bytes | None, read_only: bool) -> EventStore:
    return SqliteStore(target, key=key, read_only=read_only)


def _postgresql(target: str, key: bytes | None, read_only: bool) -> EventStore:
    # read_only is a file's matter: a database store changes nothing it is not asked to
    try:
        module = importlib.import_module("events.stores.postgres")
    except ImportError as exc:
        raise ImportError(
            f"a postgresql:// store needs the PostgreSQL store and its driver: install the "
            f"'postgres' extra (pip install 'toolledger[postgres]'); importing it failed: {exc}"
        ) from exc
    store: EventStore = module.PostgresStore(target, key=key)
    return store


def _memory(target: str, key: bytes | None, read_only: bool) -> EventStore:
    if key is not None:
        raise ValueError("memory: keeps records as objects, not sealed lines: it takes no key")
    return MemoryStore()


#: How each kind of store is opened: ``(target, key, read_only) -> store``.
SCHEMES: dict[str, Callable[[str, bytes | None, bool], EventStore]] = {
    "jsonl": _jsonl,
    "sqlite": _sqlite,
    "postgresql": _postgresql,
    "memory": _memory,
}


def open_store(
    url_or_path: str, *, key: bytes | None = None, read_only: bool = False
) -> EventStore:
    """The store ``url_or_path`` names (see the module docstring), opened with ``key`` (seal
    with it, verify with it).

    ``read_only`` opens a JSONL file or an SQLite database for reading only: it must exist,
    and nothing in it is created or changed (a database store changes nothing it is not asked
    to anyway). Raises ``ValueError`` for a URL it cannot read, ``ImportError`` naming the
    extra to install for a store whose driver is missing, and what the store itself raises
    (a missing file, a corrupt log).

    >>> store = open_store("memory:")
    >>> type(store).__name__
    'MemoryStore'
    """
    where = parse_store_url(url_or_path)
    return SCHEMES[where.kind](where.target, key, read_only)
