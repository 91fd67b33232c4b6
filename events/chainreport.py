"""What checking a log's hash chain found: :class:`VerifyReport`, with each session's
:class:`SessionChain` and the first :class:`Break`; and the :class:`Anchor` a caller keeps
outside the log. Plain values; :mod:`events.integrity` makes them.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Anchor", "Break", "SessionChain", "VerifyReport"]



@attrs.frozen(kw_only=True)
class Anchor:
    """A hash kept outside the log: record ``seq`` of ``session_id`` must carry ``hash``."""

    session_id: str
    seq: int
    hash: str


@attrs.frozen(kw_only=True)
class Break:
    """The first broken link: where (``line`` is 1-based; ``None`` when the problem is what
    the log lacks at its end), what is wrong, and a hint when there is a likely cause."""

    line: int | None
    problem: str
    session_id: str | None = None
    seq: int | None = None
    hint: str | None = None


@attrs.frozen(kw_only=True)
class SessionChain:
    """One session as far as it was checked. ``head`` is the hash of its last chained record
    (``None`` if none is chained): keep it elsewhere to detect a cut-off tail later."""

    session_id: str
    records: int
    chained: int
    unchained: int
    last_seq: int
    head: str | None


@attrs.frozen(kw_only=True)
class VerifyReport:
    """What :func:`verify_lines` found. ``ok`` when no link is broken; the sessions are as far
    as checked (up to the broken link, if any)."""

    keyed: bool
    lines: int
    sessions: tuple[SessionChain, ...]
    broken: Break | None
    anchors: int = 0

    @property
    def ok(self) -> bool:
        return self.broken is None

    @property
    def records(self) -> int:
        return sum(chain.records for chain in self.sessions)

    @property
    def chained(self) -> int:
        return sum(chain.chained for chain in self.sessions)

    @property
    def unchained(self) -> int:
        return sum(chain.unchained for chain in self.sessions)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-able dict."""
        return {
            "ok": self.ok,
            "keyed": self.keyed,
            "lines": self.lines,
            "records": self.records,
            "chained": self.chained,
            "unchained": self.unchained,
            "anchors": self.anchors,
            "broken": attrs.asdict(self.broken) if self.broken is not None else None,
            "sessions": [attrs.asdict(chain) for chain in self.sessions],
        }
