"""``toolledger show`` and ``toolledger transcript``: print what a log holds."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.text import Text

from ..core.visible import visible, visible_json
from ..present.export import session_json, transcript_json
from ..present.progress import progress_section
from ..present.render import print_session, render_transcript
from ._common import LOG_HELP, PLUGIN_HELP, fold_sessions, load_renderers, read_sessions
from .output import print_output

__all__ = ["add_parser", "run", "run_transcript"]


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help=LOG_HELP)
    parser.add_argument(
        "--session",
        metavar="ID",
        help="only this session (its full id, or a prefix that names one session)",
    )
    parser.add_argument("--json", action="store_true",
                        help="print JSON (one document: a list with one object per session)")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``show`` and ``transcript`` and their options."""
    show = commands.add_parser(
        "show",
        help="print the transcript and call tree of each session in a log",
        description=(
            "Read a log, rebuild each session from its records, and print its transcript "
            "and call tree. The log is only read, never changed."
        ),
    )
    _common_options(show)
    show.add_argument(
        "--plugin", metavar="MODULE", action="append", default=[],
        help=PLUGIN_HELP,
    )
    show.add_argument(
        "--output", metavar="CALL",
        help=("print the whole result of call CALL (of the one session, or of --session): "
              "also of a long one the model read cut, from the log or the artifact the store "
              "keeps; with --json, the result as JSON"),
    )
    show.set_defaults(run=run)
    transcript = commands.add_parser(
        "transcript",
        help="print what the model saw in each session of a log",
        description=(
            "Print each session's transcript: the user's messages, the assistant's messages "
            "and one result per call the model made (nested calls are not in it)."
        ),
    )
    _common_options(transcript)
    transcript.set_defaults(run=run_transcript)


def run(args: argparse.Namespace, console: Console) -> int:
    """Fold each session of the log and print its transcript and call tree."""
    renderers = load_renderers(args.plugin)
    if args.output is not None:
        return print_output(args.log, args.session, args.output, as_json=args.json)
    sessions = read_sessions(args.log, args.session)
    projections = fold_sessions(args.log, sessions)
    if args.json:
        print(visible_json([session_json(p) for p in projections]))
        return 0
    if not projections:
        console.print(Text(f"{visible(args.log, newlines=False)} holds no sessions", style="dim"),
                      soft_wrap=True)
    for index, (projection, records) in enumerate(zip(projections, sessions.values())):
        if index:
            console.print()
        print_session(projection, console, renderers, progress_section(projection, records))
    return 0


def run_transcript(args: argparse.Namespace, console: Console) -> int:
    """Print each session's transcript."""
    projections = fold_sessions(args.log, read_sessions(args.log, args.session))
    if args.json:
        print(visible_json([{"session_id": p.session_id, "transcript": transcript_json(p)}
                            for p in projections]))
        return 0
    for index, projection in enumerate(projections):
        if index:
            console.print()
        console.print(Text(f"Session {visible(str(projection.session_id), newlines=False)}",
                           style="bold"), soft_wrap=True)
        console.print(render_transcript(projection))
    return 0
