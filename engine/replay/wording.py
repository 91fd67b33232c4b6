"""A log's refusals in today's words, so that a replay compares facts, not phrasing.

What the model reads when a call is refused is built from the refusal's recorded facts (the
tool's name, the reason, whether a guard failed: :mod:`engine.core.refusals`). Older versions
built it differently: an approver's refusal read only "NAME was not approved", whatever its
reason, and a reason reached the model unbounded; a refusal for the session refused each later
call as "NAME was refused for this session", without the reason its answer gave. Re-driving
such a log runs today's engine, which words the same refusal its own way: that is no
divergence of the session, only of the wording.

So before comparing, :func:`in_todays_words` rewrites each refusal (its result, and the reason
of a later call's decision and denial that a refusal for the session made) that is exactly
what an older engine wrote for its recorded facts into what today's engine writes for the
same facts. A result that is neither (a log edited by hand, a wording nobody wrote) is left
as it is, and a real difference still shows. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from events.results import ToolResult, error_result
from events.types import (
    ApprovalResolved,
    PolicyDecided,
    Record,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallRequested,
)

from ..core.policy import refused_for_session
from ..core.refusals import blocked_result, denied_result, not_approved_result

__all__ = ["in_todays_words"]


def _formerly(event: ToolCallBlocked | ToolCallDenied, name: str) -> ToolResult:
    """What the engine wrote for this refusal before the model was told approvers' reasons."""
    if isinstance(event, ToolCallBlocked):
        return error_result(f"{name} was blocked: {event.reason}")
    if event.by == "policy":
        return error_result(f"{name} was denied: {event.reason}")
    return error_result(f"{name} was not approved")


def _today(event: ToolCallBlocked | ToolCallDenied, name: str, given: str | None) -> ToolResult:
    failed = event.error is not None
    if isinstance(event, ToolCallBlocked):
        return blocked_result(name, event.reason, failed=failed)
    if event.by == "policy":
        return denied_result(name, event.reason)
    return not_approved_result(name, given, failed=failed)


def _quoting(event: PolicyDecided | ToolCallDenied, name: str,
             answer: ApprovalResolved | None) -> str | None:
    """Today's reason for a later call that a refusal for the session refused, where the log
    holds the words of an engine that did not quote the refusal's reason; else ``None``."""
    if (answer is None or answer.granted or not answer.reason or event.rule is not None
            or event.reason != refused_for_session(name, None)):
        return None
    return refused_for_session(name, answer.reason)


def in_todays_words(records: Iterable[Record]) -> list[Record]:
    """``records``, each refusal worded as today's engine words it where the log holds an
    older engine's words for the same facts (see the module docstring)."""
    names: dict[str, str] = {}
    given: dict[str, str | None] = {}  # the reason the approver (or the host) gave
    for_session: dict[str, ApprovalResolved] = {}  # the last answer for the session, by tool
    out: list[Record] = []
    for record in records:
        event = record.event
        if isinstance(event, ToolCallRequested):
            names[event.call_id] = event.name
        elif isinstance(event, ApprovalResolved):
            given[event.call_id] = event.reason
            if event.scope == "session" and event.call_id in names:
                for_session[names[event.call_id]] = event
        elif isinstance(event, PolicyDecided) and event.decision == "deny" and (
            event.call_id in names
        ):
            name = names[event.call_id]
            if (reason := _quoting(event, name, for_session.get(name))) is not None:
                record = attrs.evolve(record, event=attrs.evolve(event, reason=reason))
        elif isinstance(event, (ToolCallBlocked, ToolCallDenied)) and event.call_id in names:
            name = names[event.call_id]
            formerly = _formerly(event, name)
            if isinstance(event, ToolCallDenied) and event.by == "policy" and (
                (reason := _quoting(event, name, for_session.get(name))) is not None
            ):
                event = attrs.evolve(event, reason=reason)
            if event.result == formerly:
                today = _today(event, name, given.get(event.call_id))
                if today != event.result:
                    event = attrs.evolve(event, result=today)
            if event is not record.event:
                record = attrs.evolve(record, event=event)
        out.append(record)
    return out
