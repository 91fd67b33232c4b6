"""``toolledger answer SOCKET QUESTION_ID``: a person answers, from another terminal, a tool's
question that a served session waits for (``toolledger serve ... --approvals SOCKET``;
:mod:`engine.hosts.approvalsocket`).

The answer is given as options (``--json`` with the form's fields, ``--decline``,
``--cancel``) or, with none on a terminal, in the form :func:`engine.present.terminal_asker`
shows: the same prompts, one field at a time, each value checked as it is typed. The serving
process checks the answer again against the form and records it.
"""

from __future__ import annotations

import argparse
import json
import sys

import trio
from rich.console import Console
from rich.text import Text

from ..core.errors import SessionClosed
from ..core.questions import Answer
from ..hosts.approvalsocket import answer_question, pending_questions
from ..present.terminalform import terminal_asker
from ._common import UsageError

__all__ = ["add_parser", "run"]

SOCKET_HELP = "the Unix socket the session is served with (toolledger serve --approvals SOCKET)"

#: what each action prints once recorded
_SAID = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command."""
    answer = commands.add_parser(
        "answer", help="answer a tool's question that waits in a served session",
        description=(
            "Answer the question QUESTION_ID (as toolledger approvals lists it) of the session "
            "served with --approvals SOCKET: accept it with the form's fields as a JSON object "
            "(--json), decline it or cancel it; with none of these, on a terminal, fill the "
            "form one field at a time. The session checks the answer against the form, "
            "records it, and the tool that asked goes on at once."
        ),
    )
    answer.add_argument("socket", metavar="SOCKET", help=SOCKET_HELP)
    answer.add_argument("question_id", metavar="QUESTION_ID",
                        help="the question, as listed (h0#1, 1.0#2, ...)")
    given = answer.add_mutually_exclusive_group()
    given.add_argument("--json", metavar="JSON", dest="content",
                       help="accept, with the form's fields as a JSON object, e.g. "
                            "'{\"branch\": \"main\"}'")
    given.add_argument("--decline", dest="action", action="store_const", const="decline",
                       help="decline the question: an explicit no")
    given.add_argument("--cancel", dest="action", action="store_const", const="cancel",
                       help="cancel the question: dismissed without a choice")
    answer.add_argument("--reason", metavar="TEXT",
                        help="why, with --decline or --cancel: the tool reads it")
    answer.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Send the answer, from the options or the form."""
    if args.reason is not None and args.action is None:
        raise UsageError("--reason says why a question is declined or cancelled: add "
                         "--decline or --cancel, or leave --reason out")
    if args.action is not None:
        given = Answer(action=args.action, reason=args.reason)
    elif args.content is not None:
        given = Answer(action="accept", content=_content(args.content))
    else:
        given = _from_the_form(args.socket, args.question_id)
    try:
        answer_question(args.socket, args.question_id, given.action,
                        None if given.content is None else dict(given.content),
                        reason=given.reason)
    except (ValueError, TypeError, SessionClosed) as exc:  # not waiting, content that does not fit
        raise UsageError(str(exc)) from None
    console.print(Text(f"{args.question_id} {_SAID[given.action]}"))
    return 0


def _content(text: str) -> dict[str, object]:
    try:
        content = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--json is not JSON ({exc}): write the form's fields as a JSON "
                         f"object, e.g. '{{\"branch\": \"main\"}}'") from None
    if not isinstance(content, dict):
        raise UsageError(f"--json is a JSON {type(content).__name__}, not an object: write the "
                         f"form's fields as one, e.g. '{{\"branch\": \"main\"}}'")
    return content


def _from_the_form(socket: str, question_id: str) -> Answer:
    """The person's answer, read at the terminal with the terminal asker's form."""
    if not sys.stdin.isatty():
        raise UsageError("no answer given and no terminal to ask at: add --json '{...}' "
                         "(the form's fields), --decline or --cancel")
    pending = pending_questions(socket)
    for question in pending:
        if question.question_id == question_id:
            return trio.run(terminal_asker(), question)
    listed = ", ".join(question.question_id for question in pending) or "none"
    raise UsageError(f"question {question_id} is not waiting for an answer; pending: {listed} "
                     f"(toolledger approvals {socket})")
