"""``toolledger approvals SOCKET``, ``approve SOCKET CALL_ID`` and ``deny SOCKET CALL_ID``: a
person answers, from another terminal, the approvals a served session waits for
(``toolledger serve ... --approvals SOCKET``; :mod:`engine.hosts.approvalsocket`).

What a request says came from a model and a log (the arguments, the policy's reason): it is
printed as visible escapes, never obeyed by the terminal.
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.text import Text

from ..core.approvals import ApprovalRequest
from ..core.errors import SessionClosed
from ..core.visible import visible_json
from ..hosts.approvalsocket import pending_approvals, resolve_approval
from ..present.render import short_json
from ._common import UsageError

__all__ = ["add_parser", "run_approve", "run_deny", "run_list"]

SOCKET_HELP = "the Unix socket the session is served with (toolledger serve --approvals SOCKET)"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the three commands."""
    listing = commands.add_parser(
        "approvals",
        help="list the approvals a served session waits for (toolledger serve --approvals)",
        description=(
            "List the approval requests that wait for an answer in the session served with "
            "--approvals SOCKET: call id, tool, arguments and the policy's reason. Answer one "
            "with toolledger approve or deny. See docs/frameworks.md."
        ),
    )
    listing.add_argument("socket", metavar="SOCKET", help=SOCKET_HELP)
    listing.add_argument("--wait", action="store_true",
                         help="wait until at least one request waits, then list them")
    listing.add_argument("--json", action="store_true",
                         help="print the requests as a JSON array")
    listing.set_defaults(run=run_list)

    approve = commands.add_parser(
        "approve", help="grant a call that waits for approval in a served session",
        description=("Grant the call CALL_ID of the session served with --approvals SOCKET: "
                     "the session records the answer and the call runs at once."),
    )
    approve.add_argument("socket", metavar="SOCKET", help=SOCKET_HELP)
    approve.add_argument("call_id", metavar="CALL_ID", help="the call, as listed (h0, 1.0, ...)")
    approve.add_argument("--scope", choices=("once", "session"), default="once",
                         help="session: grant every later call of the tool too (default: once)")
    approve.add_argument("--arguments", metavar="JSON",
                         help="run the call with these arguments instead (recorded as an edit "
                              "by the approver, validated again)")
    approve.set_defaults(run=run_approve)

    deny = commands.add_parser(
        "deny", help="refuse a call that waits for approval in a served session",
        description=("Refuse the call CALL_ID of the session served with --approvals SOCKET: "
                     "the session records the answer and the caller reads \"NAME was not "
                     "approved: REASON\"."),
    )
    deny.add_argument("socket", metavar="SOCKET", help=SOCKET_HELP)
    deny.add_argument("call_id", metavar="CALL_ID", help="the call, as listed (h0, 1.0, ...)")
    deny.add_argument("--scope", choices=("once", "session"), default="once",
                      help="session: refuse every later call of the tool too (default: once)")
    deny.add_argument("--reason", metavar="TEXT",
                      help="why, for the caller's model and the log")
    deny.set_defaults(run=run_deny)


def run_list(args: argparse.Namespace, console: Console) -> int:
    """Print what waits."""
    pending = pending_approvals(args.socket, wait=args.wait)
    if args.json:
        print(visible_json([_as_json(request) for request in pending]))
        return 0
    if not pending:
        console.print("Nothing waits for an answer.")
    for request in pending:  # a line each, unbroken: for people, and for grep
        console.print(Text.assemble((request.call_id, "bold"), "  ", (request.name, "cyan")),
                      soft_wrap=True)
        console.print(Text.assemble("    args    ", short_json(request.arguments, 100)),
                      soft_wrap=True)
        console.print(Text(f"    reason  {request.reason}"), soft_wrap=True)
    return 0


def run_approve(args: argparse.Namespace, console: Console) -> int:
    """Grant the call."""
    arguments = None
    if args.arguments is not None:
        try:
            arguments = json.loads(args.arguments)
        except ValueError as exc:
            raise UsageError(f"--arguments is not JSON ({exc}): write the arguments as a JSON "
                             f"object, e.g. '{{\"path\": \"docs/a.md\"}}'") from None
    _answer(args, True, arguments=arguments)
    console.print(Text(_said(args, "approved")))
    return 0


def run_deny(args: argparse.Namespace, console: Console) -> int:
    """Refuse the call."""
    _answer(args, False, reason=args.reason)
    console.print(Text(_said(args, "denied")))
    return 0


def _answer(args: argparse.Namespace, granted: bool, *, arguments: object = None,
            reason: str | None = None) -> None:
    try:
        resolve_approval(args.socket, args.call_id, granted, args.scope, arguments=arguments,
                         reason=reason)
    except (ValueError, SessionClosed) as exc:  # not waiting, an unknown id, a bad edit
        raise UsageError(str(exc)) from None


def _said(args: argparse.Namespace, answer: str) -> str:
    return f"{args.call_id} {answer}" + (" for the session" if args.scope == "session" else "")


def _as_json(request: ApprovalRequest) -> dict[str, object]:
    return {"call_id": request.call_id, "name": request.name, "arguments": request.arguments,
            "reason": request.reason, "origin": request.origin,
            "parent_id": request.parent_id}
