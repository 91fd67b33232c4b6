"""The terminal approver: a person answers each approval at the keyboard.

It reads a line in a worker thread (trio's ``to_thread``), so the session's loop keeps running
while the question waits; the question quotes everything the model chose as visible escapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from ..core.approvals import ApprovalAnswer, ApprovalRequest
from ..core.visible import visible, visible_json

__all__ = ["terminal_approver"]


def terminal_approver(
    ask: Callable[[str], str] | None = None,
) -> Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]:
    """An approver that asks a person: ``y`` once, ``a`` always (this session), ``n`` no,
    ``d`` never (this session). ``ask`` reads a line (default ``input``, run in a thread so
    the trio loop keeps going).

    The question quotes the call's name, id, reason and arguments as visible escapes, each on
    its own line (see :mod:`engine.core.visible`): a control sequence or a bidi override in them
    shows as ``\x1b[…``/``\u202e``, and cannot clear the screen, reorder the question or
    print a line of its own."""
    read = ask or input

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        name, call_id, reason = (visible(text, newlines=False)
                                 for text in (request.name, request.call_id, request.reason))
        question = (
            f"\nAllow {name} (call {call_id})? {reason}\n"
            f"  arguments: {visible_json(request.arguments)}\n"
            "  [y]es once / [a]lways / [n]o / [d]eny always: "
        )
        while True:
            answer = await trio.to_thread.run_sync(read, question, abandon_on_cancel=True)
            answer = answer.strip().lower()
            if answer in ("y", "yes"):
                return ApprovalAnswer(granted=True)
            if answer in ("a", "always"):
                return ApprovalAnswer(granted=True, scope="session")
            if answer in ("n", "no", ""):
                return ApprovalAnswer(granted=False, reason="refused at the terminal")
            if answer in ("d", "deny"):
                return ApprovalAnswer(granted=False, scope="session", reason="refused for the session")

    return approver
