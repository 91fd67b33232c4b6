"""The child's side of :mod:`events.stores.verifyapart`: open the store the request names,
check its chain, and send the report back.

Its own module because it opens every kind of store, and the stores import
:mod:`~events.stores.verifyapart` for their ``verify_apart``: nothing imports this one; the
child process runs :func:`main`.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

import trio

from ..errors import LogError
from ..integrity import Anchor, VerifyReport
from .jsonlines import verify_jsonl
from .sqlite import SqliteStore
from .verifyapart import Kind

__all__ = ["main"]


def _verify(kind: Kind, target: str, key: bytes | None, session: str | None,
            anchors: Sequence[Anchor]) -> VerifyReport:
    if kind == "jsonl":
        return verify_jsonl(target, key, session=session, anchors=anchors)
    store: Any
    if kind == "sqlite":
        store = SqliteStore(target, key=key, read_only=True)
    else:  # the extra, imported only when a request names it
        from .postgres import PostgresStore

        store = PostgresStore(target, key=key, connections=1)
    with store:
        report: VerifyReport = trio.run(partial(store.verify, session=session,
                                                anchors=anchors))
    return report


def main() -> None:
    """The child's side: read the request from stdin, write the report (or the text of the
    error that stopped the check) to stdout."""
    kind, target, key, session, anchors = pickle.load(sys.stdin.buffer)
    outcome: VerifyReport | str
    try:
        outcome = _verify(kind, target, key, session, anchors)
    except LogError as exc:
        outcome = str(exc)
    pickle.dump(outcome, sys.stdout.buffer)
