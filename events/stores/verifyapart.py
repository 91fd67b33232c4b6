"""Checking a JSONL log's hash chain in a child process: :meth:`JsonlStore.verify_apart`.

:func:`~events.stores.jsonlines.verify_jsonl` reads and hashes every line of the file: some
5 s of Python for a 190 MB log of 700 000 records. On the event loop that is 5 s of nothing
else; in a worker thread it shares the interpreter's lock with the loop, and measured beside
the web console's background fold of the same log, the loop then got about a tenth of the
CPU it used (a part of 2 000 records took 0.3-1.7 s instead of 0.02 s: docs/performance.md,
"The web console over big logs"). A child process has its own lock and its own core.

The child is this interpreter (``sys.executable``) running :func:`main`, with ``-P`` (no
working directory on its path, where a folder named like a package could stand in) and the
folder this ``events`` package is in put first on its path, so it checks with this very
code. The request (path, key, session, anchors) goes down its stdin and the report comes back
on its stdout, both pickled: the two ends are this module, and the key never appears on a
command line or in the environment. A check that is cancelled kills the child (trio's
``run_process``). An error of the check (a file that is not a log) comes back as a
:class:`~events.errors.LogError` with the child's message.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Sequence

import trio

from ..errors import LogError
from ..integrity import Anchor, VerifyReport

__all__ = ["main", "verify_apart"]

#: The folder that holds the ``events`` package: first on the child's path.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CHILD = ("import sys; sys.path.insert(0, sys.argv[1]); "
          "from events.stores.verifyapart import main; main()")


async def verify_apart(path: str, key: bytes | None, *, session: str | None = None,
                       anchors: Sequence[Anchor] = ()) -> VerifyReport:
    """:func:`~events.stores.jsonlines.verify_jsonl` of ``path`` (with ``key``, ``session``
    and ``anchors``; the artifacts in the folder beside it), run in a child process."""
    request = pickle.dumps((path, key, session, tuple(anchors)))
    done = await trio.run_process([sys.executable, "-P", "-c", _CHILD, _ROOT], stdin=request,
                                  capture_stdout=True, capture_stderr=True, check=False)
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LogError(f"the check of {path} in a child process failed (exit status "
                       f"{done.returncode}): {problem[-1] if problem else 'no message'}")
    outcome = pickle.loads(done.stdout)  # noqa: S301 - written by main(), below
    if isinstance(outcome, str):
        raise LogError(outcome)
    assert isinstance(outcome, VerifyReport)
    return outcome


def main() -> None:
    """The child's side: read the request from stdin, write the report (or the text of the
    error that stopped the check) to stdout."""
    from .jsonlines import verify_jsonl

    path, key, session, anchors = pickle.load(sys.stdin.buffer)
    outcome: VerifyReport | str
    try:
        outcome = verify_jsonl(path, key, session=session, anchors=anchors)
    except LogError as exc:
        outcome = str(exc)
    pickle.dump(outcome, sys.stdout.buffer)
