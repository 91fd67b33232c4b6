"""A log's refusals in today's words, so that a replay compares facts, not phrasing.

What the model reads when a call is refused is built from the refusal's recorded facts (the
tool's name, the reason, whether a guard failed: :mod:`engine.refusals`). Older versions
built it differently: an approver's refusal read only "NAME was not approved", whatever its
reason, and a reason reached the model unbounded. Re-driving such a log runs today's engine,
which words the same refusal its own way: that is no divergence of the session, only of the
wording.

So before comparing, :func:`in_todays_words` rewrites each refusal result that is exactly
what an older engine wrote for its recorded facts into what today's engine writes for the
same facts. A result that is neither (a log edited by hand, a wording nobody wrote) is left
as it is, and a real difference still shows. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from events.results import ToolResult, error_result
from events.types import ApprovalResolved, Record, ToolCallBlocked, ToolCallDenied, ToolCallRequested

from ..refusals import blocked_result, denied_result, not_approved_result

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


def in_todays_words(records: Iterable[Record]) -> list[Record]:
    """``records``, each refusal worded as today's engine words it where the log holds an
    older engine's words for the same facts (see the module docstring)."""
    names: dict[str, str] = {}
    given: dict[str, str | None] = {}  # the reason the approver (or the host) gave
    out: list[Record] = []
    for record in records:
        event = record.event
        if isinstance(event, ToolCallRequested):
            names[event.call_id] = event.name
        elif isinstance(event, ApprovalResolved):
            given[event.call_id] = event.reason
        elif isinstance(event, (ToolCallBlocked, ToolCallDenied)) and event.call_id in names:
            name = names[event.call_id]
            if event.result == _formerly(event, name):
                today = _today(event, name, given.get(event.call_id))
                if today != event.result:
                    record = attrs.evolve(record, event=attrs.evolve(event, result=today))
        out.append(record)
    return out
