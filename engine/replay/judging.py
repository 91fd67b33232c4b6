"""How a re-drive's report is drawn up: the recorded log against the replayed one.

:func:`redrive` (:mod:`engine.replay.driver`) runs the session again and notes on the way what
it could not do (a tool that cannot be registered now, an error that stopped the replay). Once
it has run, :func:`draw_up` compares the two logs (the tools, each call, the transcripts: see
:mod:`engine.replay.compare`) and puts those divergences, first per call, into a
:class:`~engine.replay.report.ReplayReport` with what was noted. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from events.types import Record

from ..core.reducers import LogInconsistency, fold
from .compare import Divergence, compare_calls, compare_tools, compare_transcripts
from .recorded import RecordedSession
from .report import ReplayReport, ToolMode
from .wording import in_todays_words

__all__ = ["draw_up"]


def draw_up(book: RecordedSession, replayed: Sequence[Record], *, tool_mode: ToolMode,
            found: Sequence[Divergence], notes: list[str], verified: bool) -> ReplayReport:
    """The report of a replay of ``book`` that wrote ``replayed``: what the replay ``found`` on
    the way, then every divergence of the two logs, tools first, then calls, the transcript
    and the session. ``notes`` (the replay's) gets a note of its own if the log ends mid-turn.
    ``verified`` says whether ``book``'s records were verified with the log's key.
    """
    recorded = in_todays_words(book.records)  # an older engine's wording is no divergence
    cut = book.cut_turn
    if cut is not None:
        notes.append(
            f"the log ends in the middle of turn {cut} (the session paused, or its process "
            f"stopped): where the replay carried that turn's calls further, only what the "
            f"log holds is compared")
    unregistered = {d.subject for d in found if d.scope == "tool" and d.kind == "error"}
    divergences = [*found,
                   *(d for d in compare_tools(book.records, replayed)
                     if d.subject not in unregistered),
                   *compare_calls(recorded, replayed, cut_turn=cut)]
    recorded_transcript = fold(recorded).transcript
    try:
        replayed_transcript = fold(replayed).transcript
    except LogInconsistency as exc:  # an engine bug: say so, compare what can be
        divergences.append(Divergence(scope="session", kind="error", subject="replay",
                                      now=f"the replayed log is inconsistent: {exc}"))
        replayed_transcript = fold(()).transcript
    divergences.extend(compare_transcripts(recorded_transcript, replayed_transcript,
                                           open_ended=cut is not None))
    call_ids = {getattr(r.event, "call_id", None) for r in (*book.records, *replayed)}
    call_ids.discard(None)
    order = {"tool": 0, "call": 1, "transcript": 2, "session": 3}
    divergences.sort(key=lambda d: order[d.scope])
    return ReplayReport(
        session_id=book.session_id, tool_mode=tool_mode, verified=verified,
        divergences=tuple(divergences), notes=tuple(notes),
        records=len(book.records), calls=len(call_ids),
        transcript_entries=len(recorded_transcript), replayed=tuple(replayed),
    )
