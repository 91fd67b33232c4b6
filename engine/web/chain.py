"""The ``verify`` badge: whether a session's hash chain holds, as ``toolledger verify`` says.

A check reads the log, so each answer is kept until the session grows. A session's page checks
that one session; the list checks its rows that changed, each on its own in a database (a
check reads that session's rows only), all at once in a JSONL file (a check of one session
reads the whole file anyway, so one pass serves every row).

A check of up to :data:`INLINE` records is made before the page is sent (in a JSONL file, a
file of up to :data:`INLINE_BYTES`: a check of any session there reads the whole file, so
its size is what a check costs, however few records the page's sessions have). A longer one (a
session of 100 000 calls is some 700 000 records: seconds) runs in the background, in the
console's nursery (its lifespan's: see :mod:`engine.web.folding`), and off the event loop, in
a child process (the stores' ``verify_apart``: in a thread it would share the interpreter's
lock with the console's background fold and slow it tenfold), and the page says so and shows
the last answer it has; the next page (or the live update) shows the new one. A console
whose lifespan nobody ran checks on the page's path (a long check in a child process all
the same). A store that keeps
no chain (:class:`~events.stores.MemoryStore`) says so.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from events.chainreport import VerifyReport
from events.stores import EventStore, JsonlStore

__all__ = ["INLINE", "INLINE_BYTES", "Chains"]

UNCHAINED = "no hash chain (this store keeps none)"
#: The most records (in the sessions to check) checked while the page waits.
INLINE = 20_000
#: The largest JSONL file checked while the page waits: some 20 000 records of 270 bytes.
INLINE_BYTES = 5_000_000


def _keyed(report: VerifyReport) -> str:
    return " with the key" if report.keyed else " (no key: intact, origin unproven)"


class Chains:
    """The chain badges of one store's sessions, each kept while its session is unchanged."""

    def __init__(self, store: EventStore,
                 nursery: Callable[[], trio.Nursery | None] = lambda: None) -> None:
        self._verify: Any = getattr(store, "verify", None)
        self._nursery = nursery  # where a long check runs, if anywhere
        # a JSONL file: one pass checks every session, and costs what the file's size says
        self._file = store.path if isinstance(store, JsonlStore) else None
        # a long check: in a child process (see events.stores.verifyapart)
        self._apart: Any = getattr(store, "verify_apart", None)
        self._kept: dict[str, tuple[int, str]] = {}
        self._running: set[str | None] = set()  # sessions being checked (None: every one)

    async def _check(self, key: str | None, records: int,
                     check: Callable[[bool], Awaitable[None]]) -> None:
        """Run ``check`` now if it covers at most :data:`INLINE` records (a JSONL file: if
        the file is at most :data:`INLINE_BYTES`), else in the background (once at a time
        per ``key``)."""
        nursery = self._nursery()
        long = (os.path.getsize(self._file) > INLINE_BYTES if self._file is not None
                else records > INLINE)
        if not long or nursery is None:
            await check(long)
            return
        if key in self._running:
            return
        self._running.add(key)

        async def background() -> None:
            try:
                await check(True)
            except Exception:  # noqa: BLE001 - the next page checks again
                pass
            finally:
                self._running.discard(key)

        nursery.start_soon(background)

    async def _report(self, long: bool, **kwargs: Any) -> VerifyReport:
        if long and self._apart is not None:  # in a child process
            return await self._apart(**kwargs)  # type: ignore[no-any-return]
        return await self._verify(**kwargs)  # type: ignore[no-any-return]

    def _shown(self, session_id: str, last_seq: int) -> str:
        kept = self._kept.get(session_id)
        if kept is not None and kept[0] == last_seq:
            return kept[1]
        checking = f"checking the chain (up to record {last_seq:,})…"
        return checking if kept is None else f"{kept[1]} up to record {kept[0]:,}; {checking}"

    async def badge(self, session_id: str, last_seq: int) -> str:
        """The badge of one session, as far as ``last_seq``."""
        if self._verify is None:
            return UNCHAINED
        kept = self._kept.get(session_id)
        if kept is None or kept[0] != last_seq:
            async def check(long: bool) -> None:
                report = await self._report(long, session=session_id)
                if report.broken is not None:
                    text = f"chain BROKEN: {report.broken.problem}"
                else:
                    text = "chain verified" + _keyed(report)
                self._kept[session_id] = (last_seq, text)

            await self._check(session_id, last_seq, check)
        return self._shown(session_id, last_seq)

    async def badges(self, rows: Sequence[tuple[str, int]]) -> dict[str, str]:
        """The badges of the list's rows (session id, last seq): the rows that changed since
        they were last checked are checked again (see the module docstring)."""
        if self._verify is None:
            return {sid: UNCHAINED for sid, _ in rows}
        changed = [(sid, seq) for sid, seq in rows if self._kept.get(sid, (None,))[0] != seq]
        if changed and self._file is None:
            for sid, seq in changed:
                await self.badge(sid, seq)
        elif changed:
            async def check(long: bool) -> None:
                report: VerifyReport = await self._report(long)
                checked = {chain.session_id: chain for chain in report.sessions}
                broken = report.broken.session_id if report.broken is not None else None
                for sid, seq in changed:
                    chain = checked.get(sid)
                    if sid == broken and report.broken is not None:
                        text = f"chain BROKEN: {report.broken.problem}"
                    elif chain is not None and chain.last_seq >= seq:
                        text = "chain verified" + _keyed(report)
                    else:
                        text = "not checked (the log breaks before it)"
                    self._kept[sid] = (seq, text)

            await self._check(None, sum(seq for _, seq in changed), check)
        return {sid: self._shown(sid, seq) for sid, seq in rows}
