"""Invariants of gating: which bodies ran, availability (the exposure table) and approvals
(the policy, recomputed). Part of :mod:`engine.testing.invariants` (read the overview there)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from events.types import (
    ActiveToolsSet,
    Annotations,
    ApprovalRequested,
    ApprovalResolved,
    PolicyDecided,
    Record,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolExecutionStarted,
    ToolRegistered,
    ToolsActivated,
)

from ..core.policy import PolicyRules, decide
from .shape import _ending, _fail, _kind, _requests, _terminals

__all__ = ["NEVER_RAN", "check_approvals", "check_availability", "check_bodies"]

NEVER_RAN = frozenset({"unavailable", "invalid_arguments", "duplicate_call_id", "truncated",
                       "depth_limit"})


# -- tool bodies ---------------------------------------------------------------------------------


def check_bodies(records: Sequence[Record], body_runs: Mapping[str, int]) -> None:
    """A call's body ran (``body_runs[call_id] > 0``) only if the log requested and started
    it, never if it was blocked, denied or failed before running; a body runs again only if
    the version of its tool that started it is ``idempotent`` (a newer version cannot make a
    half-run call safe to run again)."""
    requests = _requests(records)
    ends = _terminals(records)
    started = {r.event.call_id for r in records if isinstance(r.event, ToolExecutionStarted)}
    idempotent: dict[str, bool] = {}
    may_rerun: dict[str, bool] = {}
    for record in records:
        event = record.event
        if isinstance(event, ToolRegistered):
            idempotent[event.spec.name] = event.spec.annotations.idempotent is True
        elif isinstance(event, ToolExecutionStarted) and event.call_id in requests:
            may_rerun[event.call_id] = idempotent.get(requests[event.call_id].name, False)
    for call_id, runs in body_runs.items():
        if not runs:
            continue
        request = requests.get(call_id)
        if request is None:
            raise _fail(f"a tool body ran for call {call_id}, which the log never requested")
        name = request.name
        end = ends.get(call_id)
        if isinstance(end, (ToolCallBlocked, ToolCallDenied)) or (
            isinstance(end, ToolCallFailed) and end.kind in NEVER_RAN
        ):
            raise _fail(f"call {call_id} ({name}) ran its body although it was {_ending(end)}")
        if call_id not in started:
            raise _fail(f"call {call_id} ({name}) ran its body but the log has no "
                        f"tool_execution_started for it"
                        + (f"; it was {_ending(end)}" if end is not None else ""))
        if runs > 1 and not may_rerun.get(call_id, False):
            raise _fail(f"call {call_id} ({name}) ran its body {runs} times: only an idempotent "
                        f"tool's body runs again")


# -- availability --------------------------------------------------------------------------------

# DESIGN's exposure table: who may call a tool of each exposure ("active": while it is active)
_MODEL_MAY = {"direct": "active", "model-only": "active", "codemode": "active",
              "deferred": "active", "hidden": "active"}
_HOST_MAY = {"direct": "active", "model-only": "active", "codemode": "always",
             "deferred": "always", "hidden": "active"}
_NESTED_MAY = {"direct": "active", "model-only": "never", "codemode": "always",
               "deferred": "always", "hidden": "always"}
_MAY = {"model": _MODEL_MAY, "host": _HOST_MAY, "nested": _NESTED_MAY}


def _may(exposure: str | None, active: bool, origin: str) -> bool:
    if exposure is None:
        return False
    rule = _MAY[origin][exposure]
    return rule == "always" or (rule == "active" and active)


def check_availability(records: Sequence[Record], *, registry_complete: bool = True) -> None:
    """DESIGN's exposure table, recomputed from the registrations and active sets in the log:
    a call its caller may not make (unknown tool, inactive, hidden from the model, model-only
    for a nested call) fails before anything else (no handler, policy or approval is asked
    about it; it fails "not available", or for arguments that are not JSON), and a call it
    may make is not refused as unavailable. ``registry_complete=False`` skips the second half,
    for logs reopened by a process that did not register every tool the log knows."""
    exposure: dict[str, str] = {}
    active: set[str] = set()
    pending: dict[str, tuple[str, str, list[bool]]] = {}

    def evaluate() -> None:
        for name, origin, seen in pending.values():
            seen.append(_may(exposure.get(name), name in active, origin))

    for record in records:
        event = record.event
        if isinstance(event, ToolRegistered):
            spec = event.spec
            known = spec.name in exposure
            exposure[spec.name] = spec.exposure
            if spec.exposure == "hidden":
                active.discard(spec.name)
            elif not known and spec.exposure in ("direct", "model-only"):
                active.add(spec.name)
            evaluate()
        elif isinstance(event, ActiveToolsSet):
            active = set(event.names)
            evaluate()
        elif isinstance(event, ToolsActivated):
            active |= set(event.names)
            evaluate()
        elif isinstance(event, ToolCallRequested):
            pending[event.call_id] = (event.name, event.origin,
                                      [_may(exposure.get(event.name), event.name in active,
                                            event.origin)])
        elif (call_id := getattr(event, "call_id", None)) in pending:
            name, origin, seen = pending.pop(call_id)
            if isinstance(event, ToolCallCancelled) or (
                isinstance(event, ToolCallFailed)
                and event.kind in ("duplicate_call_id", "truncated")
            ):
                continue  # ended before the availability check
            where = f"seq {record.seq}: call {call_id} ({name}, a {origin} call)"
            unavailable = isinstance(event, ToolCallFailed) and event.kind == "unavailable"
            if unavailable and all(seen) and registry_complete:
                raise _fail(f"{where} ended 'not available', but the log shows the tool "
                            f"registered as {exposure.get(name)!r} and callable by a {origin} "
                            f"call then")
            if not isinstance(event, ToolCallFailed) and not any(seen):
                why = ("no tool of that name is registered" if name not in exposure else
                       f"its exposure is {exposure[name]!r} and it is "
                       f"{'active' if name in active else 'not active'}")
                raise _fail(f"{where} went past the availability check ({_kind(event)}), but "
                            f"a {origin} call may not call it: {why}")


# -- approvals -----------------------------------------------------------------------------------


def check_approvals(
    records: Sequence[Record],
    *,
    rules: PolicyRules = PolicyRules(),
    asked: Sequence[str] | None = None,
) -> None:
    """Approval is asked exactly when the policy says ask, whatever the path (nested calls,
    rewrites, parallel batches, re-activation, resumes).

    Each ``policy_decided`` is recomputed with :func:`engine.core.policy.decide` from the tool's
    registered annotations, ``rules`` (the session's :class:`~engine.PolicyRules`: they are
    not in the log) and the "for the session" answers recorded before it. An approval is
    requested right after "ask" and only then, resolved once, and a body starts only after
    "allow" or a granted approval. ``asked`` (the call ids the approver was asked about, in
    any process) must be the requested approvals, each once, except calls cancelled before
    the approver could answer."""
    notes: dict[str, Annotations] = {}
    names: dict[str, str] = {}
    grants: dict[str, ApprovalResolved] = {}  # the last answer for the session, by tool
    decisions: dict[str, str] = {}
    requested: dict[str, int] = {}
    resolved: dict[str, ApprovalResolved] = {}
    ends = _terminals(records)
    for record in records:
        event = record.event
        where = f"seq {record.seq}"
        if isinstance(event, ToolRegistered):
            notes[event.spec.name] = event.spec.annotations
            continue
        call_id = getattr(event, "call_id", None)
        if call_id is None:
            continue
        if isinstance(event, ToolCallRequested):
            names[call_id] = event.name
            continue
        name = names.get(call_id, "?")
        if decisions.get(call_id) == "ask" and call_id not in requested and not isinstance(
            event, (ApprovalRequested, ToolCallCancelled)
        ):
            raise _fail(f"{where}: the policy said ask for call {call_id} ({name}), but its next "
                        f"event is {_kind(event)}, not approval_requested")
        if isinstance(event, PolicyDecided):
            annotations = notes.get(name, Annotations())
            expected = decide(name, annotations, rules=rules, session_grants=grants)
            # a log written before a refusal for the session quoted its reason to later calls
            unquoted = decide(name, annotations, rules=rules,
                              session_grants={tool: answer.granted
                                              for tool, answer in grants.items()})
            if (event.decision, event.reason) not in ((expected.decision, expected.reason),
                                                      (unquoted.decision, unquoted.reason)):
                held = {tool: answer.granted for tool, answer in grants.items()}
                raise _fail(
                    f"{where}: the policy said {event.decision} ({event.reason}) for call "
                    f"{call_id} ({name}); with its annotations, the rules and the session's "
                    f"grants then ({held}) it says {expected.decision} ({expected.reason})")
            decisions[call_id] = event.decision
        elif isinstance(event, ApprovalRequested):
            if decisions.get(call_id) != "ask":
                raise _fail(f"{where}: approval was requested for call {call_id} ({name}) "
                            f"although the policy said {decisions.get(call_id, 'nothing yet')}")
            requested[call_id] = record.seq
        elif isinstance(event, ApprovalResolved):
            if call_id not in requested:
                raise _fail(f"{where}: call {call_id} ({name}) has an approval resolved that "
                            f"was never requested")
            if call_id in resolved:
                raise _fail(f"{where}: the approval of call {call_id} ({name}) was resolved twice")
            resolved[call_id] = event
            if event.scope == "session":
                grants[name] = event
        elif isinstance(event, ToolExecutionStarted):
            decision = decisions.get(call_id)
            approval = resolved.get(call_id)
            if not (decision == "allow" or (decision == "ask" and approval is not None
                                            and approval.granted)):
                why = ("the policy never judged it" if decision is None else
                       "the policy denied it" if decision == "deny" else
                       "its approval was refused" if approval is not None else
                       "its approval was never granted")
                raise _fail(f"{where}: call {call_id} ({name}) started although {why}")
    if asked is None:
        return
    twice = [c for c, n in Counter(asked).items() if n > 1]
    if twice:
        raise _fail(f"the approver was asked more than once about call(s) {', '.join(twice)}")
    stray = [c for c in asked if c not in requested]
    if stray:
        raise _fail(f"the approver was asked about call(s) {', '.join(stray)}, whose approval "
                    f"the log never requested")
    missed = [c for c in requested if c not in set(asked)
              and not (c not in resolved and isinstance(ends.get(c), ToolCallCancelled))]
    if missed:
        raise _fail(f"the log requested approval of call(s) {', '.join(missed)}, but the "
                    f"approver was never asked")
