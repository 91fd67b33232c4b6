"""The approval policy: a pure function from what the log knows to allow, deny or ask.

The rule for annotations is MCP's, as the seed page wrote it::

    needs_approval = destructive is True or (
        read_only is not True and ((destructive if destructive is not None else True)
                                   or (open_world if open_world is not None else True)))

so a tool that declares nothing is treated as dangerous, and an explicit ``destructive=True``
asks even when the tool also claims ``read_only=True``. On top of it sit rules by tool name
(``fnmatch`` patterns, configured by the host) and the session's memory of approvals given or
refused "for the session", which the reducers fold from ``ApprovalResolved`` events.

Precedence, first match wins: a deny rule; a session-wide refusal; an allow rule; a
session-wide grant; an ask rule; the annotation rule. A session-wide refusal quotes the reason
its answer gave (read from the recorded ``ApprovalResolved``, so a session reopened from its
log quotes it too), cut to :data:`~engine.core.refusals.REASON_LIMIT` characters: every call it
refuses says why, not only the one it answered. Deny beats everything so that a host's
"never" cannot be overridden by a click in a terminal. It also beats the log: the runtime asks
:func:`deny_rule` again just before a body runs, so a call the log allowed or sent for approval
before the host added the rule (a session reopened with new rules) is denied, not run.

A decision names the rule that decided it (:attr:`PolicyDecision.rule`), and the runtime
records that name as a field: a program reads the field, never the reason's words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

import attrs

from events.renamed import renamed_attribute
from events.types import Annotations, ApprovalResolved, Decision

from .refusals import REASON_LIMIT

__all__ = ["PolicyDecision", "PolicyRules", "by_annotations", "decide", "deny_rule",
           "needs_approval", "refused_for_session"]


def needs_approval(annotations: Annotations) -> bool:
    """Whether a call of a tool with these annotations must be approved (MCP defaults)."""
    destructive = annotations.destructive
    read_only = annotations.read_only
    open_world = annotations.open_world
    return destructive is True or (
        read_only is not True
        and (
            (destructive if destructive is not None else True)
            or (open_world if open_world is not None else True)
        )
    )


def _patterns(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen(kw_only=True)
class PolicyRules:
    """The host's rules by tool name, as ``fnmatch`` patterns (``"read_*"``).

    ``deny`` always denies, ``allow`` allows without asking (unless denied), ``ask`` asks even
    for a read-only tool. Example: ``PolicyRules(allow=["read_file"], deny=["rm_*"])``.
    """

    allow: tuple[str, ...] = attrs.field(default=(), converter=_patterns)
    deny: tuple[str, ...] = attrs.field(default=(), converter=_patterns)
    ask: tuple[str, ...] = attrs.field(default=(), converter=_patterns)


@attrs.frozen(kw_only=True)
class PolicyDecision:
    """What the policy decided and why: ``reason`` in words a person reading the log
    understands, ``rule`` the host's pattern that decided (``None`` if none did)."""

    decision: Decision
    reason: str
    rule: str | None = None


def _match(patterns: tuple[str, ...], name: str) -> str | None:
    for pattern in patterns:
        if fnmatchcase(name, pattern):
            return pattern
    return None


_DEFAULTS = {"read_only": False, "destructive": True, "open_world": True}


def _describe(annotations: Annotations) -> str:
    """The three hints the rule reads, each marked when it is MCP's default, not declared."""
    parts = []
    for field, default in _DEFAULTS.items():
        value = getattr(annotations, field)
        parts.append(f"{field}={default} (default)" if value is None else f"{field}={value}")
    return ", ".join(parts)


def deny_rule(name: str, rules: PolicyRules) -> PolicyDecision | None:
    """The decision of the first deny rule that matches tool ``name``, or ``None``: the one
    check that holds whatever else was decided (see the module docstring)."""
    pattern = _match(rules.deny, name)
    if pattern is None:
        return None
    return PolicyDecision(decision="deny", reason=f"denied by the rule {pattern!r}",
                          rule=pattern)


def decide(
    name: str,
    annotations: Annotations,
    *,
    rules: PolicyRules = PolicyRules(),
    session_grants: Mapping[str, bool | ApprovalResolved] = {},
    annotation_rule: Callable[[str, Annotations], PolicyDecision] | None = None,
) -> PolicyDecision:
    """Judge a call of tool ``name``.

    ``session_grants`` maps a tool name to the last "for the session" answer the approver gave:
    the recorded ``ApprovalResolved`` (what a session passes: a refusal then quotes its
    reason), or just whether it granted (``True`` granted, ``False`` refused). The arguments
    do not enter the built-in rules; a host that judges arguments does it in a ``tool_call``
    handler, which runs first. ``annotation_rule``: what gives the decision when no rule or
    answer does (:func:`by_annotations` by default; a session passes its registry's).
    """
    if (denied := deny_rule(name, rules)) is not None:
        return denied
    answer = session_grants.get(name)
    grant = answer if answer is None or isinstance(answer, bool) else answer.granted
    if grant is False:
        given = None if isinstance(answer, bool) or answer is None else answer.reason
        return PolicyDecision(decision="deny", reason=refused_for_session(name, given))
    if pattern := _match(rules.allow, name):
        return PolicyDecision(decision="allow", reason=f"allowed by the rule {pattern!r}",
                              rule=pattern)
    if grant is True:
        return PolicyDecision(decision="allow", reason=f"{name} was approved for this session")
    if pattern := _match(rules.ask, name):
        return PolicyDecision(decision="ask", reason=f"the rule {pattern!r} asks", rule=pattern)
    return (annotation_rule or by_annotations)(name, annotations)


def refused_for_session(name: str, given: str | None) -> str:
    """The reason of a decision that a refusal for the session made: the reason ``given``
    with the refusal, if any, quoted (cut to :data:`~engine.core.refusals.REASON_LIMIT`
    characters; the resolution keeps it whole)::

        >>> refused_for_session("rm", "never in production")
        'rm was refused for this session: never in production'
        >>> refused_for_session("rm", None)
        'rm was refused for this session'
    """
    if not given:
        return f"{name} was refused for this session"
    if len(given) > REASON_LIMIT:
        given = f"{given[:REASON_LIMIT]}… ({len(given) - REASON_LIMIT} more characters)"
    return f"{name} was refused for this session: {given}"


def by_annotations(name: str, annotations: Annotations) -> PolicyDecision:
    """The annotation rule's decision for tool ``name``: ask if :func:`needs_approval`, else
    allow. The same for every call of a tool: a session asks its registry
    (:meth:`engine.core.registry.Registry.by_annotations`), which remembers it per tool."""
    if needs_approval(annotations):
        return PolicyDecision(decision="ask",
                              reason=f"{name} needs approval: {_describe(annotations)}")
    declared = ", ".join(
        f"{field}={getattr(annotations, field)}"
        for field in _DEFAULTS
        if getattr(annotations, field) is not None
    )
    return PolicyDecision(decision="allow", reason=f"{name} needs no approval: {declared}")


#: Names this module had before, for code written against them (each warns).
_RENAMED = {"Verdict": "PolicyDecision"}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
