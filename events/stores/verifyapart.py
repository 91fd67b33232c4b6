"""Checking a log's hash chain in a child process: the stores' ``verify_apart``.

A store's ``verify`` reads and hashes every record: some 5 s of Python for a log of 700 000
records. On the event loop that is 5 s of nothing else; in a worker thread (as the database
stores' ``verify`` runs) it shares the interpreter's lock with the loop, and measured beside
the web console's background fold of the same log, the loop then got about a tenth of the
CPU it used (a part of 2 000 records took 0.3-1.7 s instead of 0.02 s, and a page 5 s:
docs/performance.md, "The web console over big logs"). A child process has its own lock and
its own core.

The child is this interpreter (``sys.executable``) running
:func:`events.stores.verifychild.main`, with ``-P`` (no
working directory on its path, where a folder named like a package could stand in) and the
folder this ``events`` package is in put first on its path, so it checks with this very
code. It opens the store read-only from what the request names (a JSONL file is checked by
:func:`~events.stores.jsonlines.verify_jsonl` without opening a store: no index is needed),
runs its ``verify``, and closes it. The request (what to open, the key, session, anchors)
goes down its stdin and the report comes back on its stdout, both pickled: the two ends are
this module and that one, and neither the key nor a database's password appears on a command line or in
the environment. A check that is cancelled kills the child (trio's ``run_process``). An
error of the check (a file that is not a log, a database that cannot be reached) comes back
as a :class:`~events.errors.LogError` with the child's message.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterable, Sequence
from typing import Literal

import trio

from ..errors import LogError
from ..integrity import Anchor, VerifyReport

__all__ = ["ChecksApart", "Kind", "verify_apart"]

#: The stores a child can open: a JSONL file, an SQLite database, a PostgreSQL database.
Kind = Literal["jsonl", "sqlite", "postgresql"]

#: The folder that holds the ``events`` package: first on the child's path.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from events.stores.verifychild import main; main()")


async def verify_apart(kind: Kind, target: str, key: bytes | None, *,
                       session: str | None = None, anchors: Sequence[Anchor] = ()
                       ) -> VerifyReport:
    """The ``verify`` report (``session``, ``anchors``) of the store of ``kind`` on ``target``
    (a file's path, or PostgreSQL's conninfo) with ``key``, made in a child process."""
    request = pickle.dumps((kind, target, key, session, tuple(anchors)))
    done = await trio.run_process([sys.executable, "-P", "-c", _CHILD, _ROOT], stdin=request,
                                  capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LogError(f"the check of {kind} log {target if kind != 'postgresql' else ''} "
                       f"in a child process failed (exit status {done.returncode}): "
                       f"{problem[-1] if problem else 'no message'}")
    outcome = pickle.loads(done.stdout)  # noqa: S301 - written by verifychild.main()
    if isinstance(outcome, str):
        raise LogError(outcome)
    assert isinstance(outcome, VerifyReport)
    return outcome


class ChecksApart:
    """``verify_apart`` for a store a child process can open again: the store says how with
    :meth:`_opened_as`, and keeps its key in ``_key``."""

    _key: bytes | None

    def _opened_as(self) -> tuple[Kind, str]:
        """The kind of store, and its path or conninfo."""
        raise NotImplementedError

    async def verify_apart(
        self, *, session: str | None = None, anchors: Iterable[Anchor] = ()
    ) -> VerifyReport:
        """The store's ``verify`` (``session``, ``anchors``) made in a child process, for a
        long check while this process goes on serving: neither the event loop nor the
        interpreter's lock is held for the seconds it takes (see the module docstring)."""
        kind, target = self._opened_as()
        return await verify_apart(kind, target, self._key, session=session,
                                  anchors=tuple(anchors))
