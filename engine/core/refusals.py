"""What the model reads when a call did not run because something refused it.

A refusal is recorded with its reason (``ToolCallBlocked.reason``, ``ToolCallDenied.reason``)
and with the result the model is handed (``result``). The result says why, in words the
model can use:

- a ``tool_call`` handler's block: ``"NAME was blocked: REASON"``;
- the policy's denial: ``"NAME was denied: REASON"`` (the rule that matched, or a refusal
  for the session);
- the approver's or the host's refusal: ``"NAME was not approved: REASON"``, or
  ``"NAME was not approved"`` when no reason was given.

A reason comes from the host's code (a handler, an approver, a person at a terminal), so it is
made safe first (:func:`for_model`): control characters and bidirectional overrides go, and
it is cut to :data:`REASON_LIMIT` characters. The log keeps the reason whole.

A guard that *failed* (a handler or an approver that raised) is not a reason: its exception
names the host's code (qualified function names, ``<locals>``, paths, hosts). The model reads
only that the guard failed; the event keeps the exception in its ``error`` field, and the
reason keeps the handler's name and the exception's type and message, for people.

Pure: these functions only build text, the same for a live session and a replay.
"""

from __future__ import annotations

from events.results import ToolResult, error_result

from .visible import HIDDEN

__all__ = [
    "APPROVER_FAILED",
    "APPROVER_REFUSED",
    "HANDLER_FAILED",
    "REASON_LIMIT",
    "blocked_result",
    "denied_result",
    "for_model",
    "not_approved_result",
]

#: The most characters of a reason the model reads.
REASON_LIMIT = 500

#: What the model reads when a ``tool_call`` handler raised (the call is blocked: fail closed).
HANDLER_FAILED = "a tool_call handler failed"
#: What the model reads when the approver raised (the call is refused: fail closed).
APPROVER_FAILED = "the approver failed"
#: why a call the approver refused without saying why was denied, as the log records it
APPROVER_REFUSED = "the approver refused"

def for_model(reason: str, limit: int = REASON_LIMIT) -> str:
    """``reason`` as the model may read it: without control characters, bidirectional
    overrides, other invisible format characters or lone surrogates (each becomes ``U+FFFD``), and at most ``limit`` characters
    (plus a note of how many were left out)::

        >>> for_model("only docs/ may be deleted")
        'only docs/ may be deleted'
        >>> for_model("\\x1b[2J") == "\\ufffd[2J"
        True
    """
    # the characters a terminal would obey or hide (engine.core.visible's one table) are no more
    # use to a model: each becomes U+FFFD
    kept = HIDDEN.sub("\ufffd", reason[:limit])
    if len(reason) > limit:
        kept += f"… ({len(reason) - limit} more characters)"
    return kept


def blocked_result(name: str, reason: str, *, failed: bool = False) -> ToolResult:
    """The result of a call a ``tool_call`` handler blocked (``failed``: the handler raised)."""
    return error_result(f"{name} was blocked: {HANDLER_FAILED if failed else for_model(reason)}")


def denied_result(name: str, reason: str) -> ToolResult:
    """The result of a call the policy denied."""
    return error_result(f"{name} was denied: {for_model(reason)}")


def not_approved_result(name: str, reason: str | None, *, failed: bool = False) -> ToolResult:
    """The result of a call the approver (or the host, answering later) refused: with the
    reason it gave, if any (``failed``: the approver raised)."""
    if failed:
        return error_result(f"{name} was not approved: {APPROVER_FAILED}")
    if not reason:
        return error_result(f"{name} was not approved")
    return error_result(f"{name} was not approved: {for_model(reason)}")
