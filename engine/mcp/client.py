"""The SDK's client, as a mount uses it: what it turns off, and how it reports a failure.

A mount connects with the SDK's :class:`mcp.Client` and leaves everything about a tool's
result to the session but the transport: the client's own check of structured output against
the tool's output schema is turned off on every connection
(:func:`leave_output_to_the_session`), because it runs a validator of its own choosing, with
backtracking patterns, on the event loop. A connection that fails is said in one line
(:func:`reason`), not as the nested exception groups of the SDK's task groups.
"""

from __future__ import annotations

from ._sdk import mcp, mcp_types

__all__ = ["leave_output_to_the_session", "reason"]


async def _checked_by_the_session(name: str, result: mcp_types.CallToolResult) -> None:
    """What a mount's client does instead of checking a result against the tool's output
    schema itself: nothing. The session checks it, against the schema it registered.

    The SDK's client checks with ``jsonschema``, whose ``pattern`` runs in Python's
    backtracking ``re``, on the event loop, where no timeout or cancel scope can stop it: a
    server whose schema says ``^(a+)+$`` and that answers 28 ``a`` and a ``!`` froze the loop
    for seconds. For a tool it has not listed yet, the check lists the server's tools again,
    unbounded. The session's own check uses the schema that passed its rules when the tool was
    registered, with linear-time patterns (:mod:`engine.core.schemas.patterns`), and keeps the value that
    failed in the log, as for a local tool's output."""


def leave_output_to_the_session(client: mcp.Client) -> None:
    """Turn off ``client``'s own check of tool results (:func:`_checked_by_the_session`), or
    refuse to go on with an SDK whose check cannot be turned off this way."""
    session = client.session
    if not callable(getattr(type(session), "validate_tool_result", None)):
        raise RuntimeError(
            "this version of the MCP SDK checks tool results in a way toolledger does not "
            "know how to leave to the session (ClientSession.validate_tool_result is gone); "
            "install an mcp version that toolledger supports (pip install 'toolledger[mcp]')")
    session.validate_tool_result = _checked_by_the_session  # type: ignore[method-assign]


def reason(exc: BaseException) -> str:
    """What went wrong, from the first exception inside ``exc``'s groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
