"""``toolledger approvals SOCKET``, ``approve SOCKET CALL_ID``, ``deny SOCKET CALL_ID`` and
``answer SOCKET QUESTION_ID``: a person answers, from another terminal, the approvals and the
tools' questions a served session waits for (``toolledger serve ... --approvals SOCKET``;
:mod:`engine.hosts.approvalsocket`).

What a request or a question says came from a model, a tool and a log (the arguments, the
policy's reason, the message, the form): it is printed as visible escapes, never obeyed by the
terminal.
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.text import Text

from ..core.approvals import ApprovalRequest
from ..core.errors import SessionClosed
from ..core.forms import choices, field_kind
from ..core.questions import Question
from ..core.visible import visible, visible_json
from ..hosts.approvalsocket import resolve_approval, waiting
from ..present.render import short_json
from ..present.terminalform import field_notes
from ._common import UsageError
from .answer import add_parser as add_answer_parser

__all__ = ["add_parser", "run_approve", "run_deny", "run_list"]

SOCKET_HELP = "the Unix socket the session is served with (toolledger serve --approvals SOCKET)"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the three commands."""
    listing = commands.add_parser(
        "approvals",
        help="list the approvals and questions a served session waits for (toolledger serve "
             "--approvals)",
        description=(
            "List what waits for an answer in the session served with --approvals SOCKET: "
            "each approval request (call id, tool, arguments and the policy's reason), then "
            "each tool's question (question id, tool, call, message and the form's fields). "
            "Answer a request with toolledger approve or deny, a question with toolledger "
            "answer. See docs/frameworks.md."
        ),
    )
    listing.add_argument("socket", metavar="SOCKET", help=SOCKET_HELP)
    listing.add_argument("--wait", action="store_true",
                         help="wait until at least one request or question waits, then list "
                              "them")
    listing.add_argument("--json", action="store_true",
                         help="print them as a JSON array, each with its \"kind\": "
                              "\"approval\" or \"question\"")
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

    add_answer_parser(commands)


def run_list(args: argparse.Namespace, console: Console) -> int:
    """Print what waits."""
    found = waiting(args.socket, wait=args.wait)
    if args.json:
        print(visible_json([*(_as_json(request) for request in found.approvals),
                            *(_question_json(question) for question in found.questions)]))
        return 0
    if not found.approvals and not found.questions:
        console.print("Nothing waits for an answer.")
    for request in found.approvals:  # a line each, unbroken: for people, and for grep
        console.print(Text.assemble((request.call_id, "bold"), "  ", (request.name, "cyan")),
                      soft_wrap=True)
        console.print(Text.assemble("    args    ", short_json(request.arguments, 100)),
                      soft_wrap=True)
        console.print(Text(f"    reason  {request.reason}"), soft_wrap=True)
    for question in found.questions:
        console.print(Text.assemble((question.question_id, "bold"), "  ",
                                    (question.name, "cyan"), f" asks (call {question.call_id})"),
                      soft_wrap=True)
        console.print(Text(f"    message  {visible(question.message, newlines=False)}"),
                      soft_wrap=True)
        for line in _fields(question):
            console.print(Text(f"    field    {line}"), soft_wrap=True)
    return 0


def _fields(question: Question) -> list[str]:
    """A line for each field of the question's form: its name, kind, bounds, choices."""
    required = set(question.schema.get("required", ()))
    lines = []
    for name, field in question.schema["properties"].items():
        notes = ", ".join(field_notes(field, name in required))
        line = f"{visible(name, newlines=False)} ({notes})"
        if field_kind(field) in ("enum", "multi"):
            line += f" one of {visible_json([value for value, _ in choices(field)])}"
        lines.append(line)
    return lines


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
    return {"kind": "approval", "call_id": request.call_id, "name": request.name,
            "arguments": request.arguments,
            "reason": request.reason, "origin": request.origin,
            "parent_id": request.parent_id}


def _question_json(question: Question) -> dict[str, object]:
    return {"kind": "question", "question_id": question.question_id,
            "call_id": question.call_id, "name": question.name, "message": question.message,
            "schema": question.schema, "origin": question.origin,
            "parent_id": question.parent_id}
