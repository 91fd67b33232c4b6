"""The ``verify`` badge: whether a session's hash chain holds, as ``toolledger verify`` says.

A check reads the log, so each answer is kept until the session grows. A session's page checks
that one session; the list checks its rows that changed, each on its own in a database (a
check reads that session's rows only), all at once in a JSONL file (a check of one session
reads the whole file anyway, so one pass serves every row).
A store that keeps no chain (:class:`~events.stores.MemoryStore`) says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from events.chainreport import VerifyReport
from events.stores import EventStore, JsonlStore

__all__ = ["Chains"]

UNCHAINED = "no hash chain (this store keeps none)"


def _keyed(report: VerifyReport) -> str:
    return " with the key" if report.keyed else " (no key: intact, origin unproven)"


class Chains:
    """The chain badges of one store's sessions, each kept while its session is unchanged."""

    def __init__(self, store: EventStore) -> None:
        self._verify: Any = getattr(store, "verify", None)
        self._one_pass = isinstance(store, JsonlStore)
        self._kept: dict[str, tuple[int, str]] = {}

    async def badge(self, session_id: str, last_seq: int) -> str:
        """The badge of one session, as far as ``last_seq``."""
        if self._verify is None:
            return UNCHAINED
        kept = self._kept.get(session_id)
        if kept is not None and kept[0] == last_seq:
            return kept[1]
        report: VerifyReport = await self._verify(session=session_id)
        if report.broken is not None:
            text = f"chain BROKEN: {report.broken.problem}"
        else:
            text = "chain verified" + _keyed(report)
        self._kept[session_id] = (last_seq, text)
        return text

    async def badges(self, rows: Sequence[tuple[str, int]]) -> dict[str, str]:
        """The badges of the list's rows (session id, last seq): the rows that changed since
        they were last checked are checked again (see the module docstring)."""
        if self._verify is None:
            return {sid: UNCHAINED for sid, _ in rows}
        changed = [(sid, seq) for sid, seq in rows if self._kept.get(sid, (None,))[0] != seq]
        if changed and not self._one_pass:
            for sid, seq in changed:
                await self.badge(sid, seq)
        elif changed:
            report: VerifyReport = await self._verify()
            checked = {chain.session_id: chain for chain in report.sessions}
            broken = report.broken.session_id if report.broken is not None else None
            for sid, seq in rows:
                chain = checked.get(sid)
                if sid == broken and report.broken is not None:
                    text = f"chain BROKEN: {report.broken.problem}"
                elif chain is not None and chain.last_seq >= seq:
                    text = "chain verified" + _keyed(report)
                else:
                    text = "not checked (the log breaks before it)"
                self._kept[sid] = (seq, text)
        return {sid: self._kept[sid][1] for sid, _ in rows}
