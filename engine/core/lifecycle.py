"""The lifecycle of one tool call, as a transition table.

Theory of operation
-------------------

Everything that decides which event may follow which, for one call, lives here and nowhere
else. The table is data: ``TRANSITIONS[stage][key] -> next stage``, where ``key`` is the event's
log name (``"tool_call_requested"``), refined by its decision for the two events whose meaning
depends on it (``"policy_decided:ask"``, ``"approval_resolved:granted"``). An event the table
does not list for the call's current stage is a :class:`LifecycleError` at once: a corrupt or
forged log shows up here, and so does an engine bug.

A call moves through these stages (:class:`CallStage`; a *stage* is where one call is, the
session's *state* is everything derived from its log)::

    requested ──rewrite──▶ requested
        │ policy: allow ──────────────────────────────▶ allowed ──started──▶ running
        │ policy: ask ──▶ asking ──approval requested─▶ awaiting
        │                     awaiting ──rewrite (the approver's edit)──▶ awaiting
        │                     awaiting ──granted──▶ allowed
        │                     awaiting ──denied───▶ denying
        │ policy: deny ─────────────────────────────────▶ denying ──denied──▶ closed
        └ blocked | failed (unavailable, invalid arguments, …) ──▶ closed
    allowed ──denied | failed (unavailable)──▶ closed
    running ──progress | question asked | question answered──▶ running
    running ──tools activated | result handler failed──▶ running
    running ──program suspended (the code tool's program, its state kept)──▶ running
    running ──started (the body runs again after a restart)──▶ running
    running ──completed | failed | denied──▶ closed
    any open stage ──cancelled──▶ closed

A deny rule is checked again just before a body runs, whatever the log decided: ``allowed``
(about to start) and ``running`` (a body that runs again after a restart) may end denied.

``closed`` accepts nothing: exactly one terminal event per call. Arguments can change only
before the policy has judged them (handlers) or while a human is looking at them (the
approver's edit), so no log can run arguments the policy never saw unless a person approved
them. A second ``started`` while running is a re-run of an idempotent body after a restart:
it is written before the body runs again, so two processes re-entering the same call cannot
both write it (the store's conflict check refuses the second). This module knows nothing about tools, sessions or I/O: the reducers feed it events, the
runtime produces only events it allows, and the docs' diagram is generated from the table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from events.codec import EVENT_TYPES, type_name
from events.renamed import renamed_attribute
from events.types import ApprovalResolved, PolicyDecided

__all__ = ["CallStage", "LifecycleError", "TRANSITIONS", "diagram", "event_key", "next_stage"]

#: Public names renamed since they shipped: the old name still works, with a warning naming
#: the new one (docs/concepts.md, "Words").
_RENAMED = {
    "CallState": "CallStage",
    "next_state": "next_stage",
}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)


class CallStage(enum.Enum):
    """Where a call is in its lifecycle."""

    NEW = "new"
    REQUESTED = "requested"
    ASKING = "asking"
    AWAITING = "awaiting"
    ALLOWED = "allowed"
    DENYING = "denying"
    RUNNING = "running"
    CLOSED = "closed"


class LifecycleError(ValueError):
    """An event that the call's lifecycle does not allow in its current stage."""


S = CallStage
_CANCEL = {"tool_call_cancelled": S.CLOSED}

TRANSITIONS: Mapping[CallStage, Mapping[str, CallStage]] = {
    S.NEW: {"tool_call_requested": S.REQUESTED},
    S.REQUESTED: {
        "tool_call_rewritten": S.REQUESTED,
        "policy_decided:allow": S.ALLOWED,
        "policy_decided:ask": S.ASKING,
        "policy_decided:deny": S.DENYING,
        "tool_call_blocked": S.CLOSED,
        "tool_call_failed": S.CLOSED,
        **_CANCEL,
    },
    S.ASKING: {"approval_requested": S.AWAITING, **_CANCEL},
    S.AWAITING: {
        "tool_call_rewritten": S.AWAITING,
        "approval_resolved:granted": S.ALLOWED,
        "approval_resolved:denied": S.DENYING,
        **_CANCEL,
    },
    S.ALLOWED: {
        "tool_execution_started": S.RUNNING,
        "tool_call_failed": S.CLOSED,
        "tool_call_denied": S.CLOSED,
        **_CANCEL,
    },
    S.DENYING: {"tool_call_denied": S.CLOSED, **_CANCEL},
    S.RUNNING: {
        "tool_execution_started": S.RUNNING,
        "tool_progress": S.RUNNING,
        "question_asked": S.RUNNING,
        "question_answered": S.RUNNING,
        "program_suspended": S.RUNNING,
        "tools_activated": S.RUNNING,
        "result_handler_failed": S.RUNNING,
        "tool_call_completed": S.CLOSED,
        "tool_call_failed": S.CLOSED,
        "tool_call_denied": S.CLOSED,
        **_CANCEL,
    },
    S.CLOSED: {},
}


def event_key(event: Any) -> str:
    """The table's key for ``event``: its log name, refined by its decision where it has one."""
    if isinstance(event, PolicyDecided):
        return f"policy_decided:{event.decision}"
    if isinstance(event, ApprovalResolved):
        return "approval_resolved:granted" if event.granted else "approval_resolved:denied"
    return type_name(event)


# The same table by (stage, event class), for the classes whose key is their log name alone:
# one dict lookup per event instead of building its key.
# Keyed by the stage's value: an Enum member hashes in Python, its value string in C.
_BY_CLASS: Mapping[tuple[str, type[Any]], CallStage] = {
    (stage._value_, EVENT_TYPES[key]): target
    for stage, moves in TRANSITIONS.items()
    for key, target in moves.items()
    if ":" not in key
}


# And by (stage's value, key), for the rest (the keys refined by a decision).
_BY_KEY: Mapping[tuple[str, str], CallStage] = {
    (stage._value_, key): target
    for stage, moves in TRANSITIONS.items()
    for key, target in moves.items()
}


def next_stage(stage: CallStage, event: Any, *, call_id: str = "?") -> CallStage:
    """The stage after ``event``; raises :class:`LifecycleError` if the table forbids it."""
    known = _BY_CLASS.get((stage._value_, type(event)))
    if known is not None:
        return known
    key = event_key(event)
    known = _BY_KEY.get((stage._value_, key))
    if known is not None:
        return known
    allowed = ", ".join(sorted(TRANSITIONS[stage])) or "nothing (the call is closed)"
    raise LifecycleError(
        f"call {call_id}: {key} is not allowed in stage {stage.value!r}; allowed: {allowed}"
    )


def diagram() -> str:
    """The table as a Mermaid state diagram; docs/events.md embeds this text verbatim (a test
    checks it), so the picture cannot drift from the rules."""
    lines = ["stateDiagram-v2", f"    [*] --> {S.NEW.value}"]
    for stage, moves in TRANSITIONS.items():
        for key, target in moves.items():
            lines.append(f"    {stage.value} --> {target.value}: {key}")
    lines.append(f"    {S.CLOSED.value} --> [*]")
    return "\n".join(lines)
