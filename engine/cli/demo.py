"""``toolledger demo``: a real session over a tiny project, printed."""

from __future__ import annotations

import argparse
import sys
from functools import partial

import trio
from rich.console import Console
from rich.text import Text

from events.types import ToolProgress

from ..core.approvals import Approver, approve_all, deny_all
from ..core.errors import CodeModeUnavailable
from ..core.visible import visible_json
from ..demo import DemoRun, ProgressWatcher, run_demo
from ..models import ModelError
from ..models.connect import check_spec
from ..present.export import session_json
from ..present.progress import live_line, progress_section
from ..present.render import Renderers, print_session
from ..present.terminal import terminal_approver
from ._common import UsageError, command_name

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    demo = commands.add_parser(
        "demo",
        help="run a scripted session with real tools over a tiny Python project",
        description=(
            "Write a tiny Python project with a bug into DIR, then run a scripted session whose "
            "tools do real work there: read a file, run the tests, write the fix (this asks "
            "for approval), and review the change (two nested calls). Prints the transcript, "
            "the call tree and where the log is (DIR/session.jsonl, recreated on every run)."
        ),
    )
    demo.add_argument(
        "--approve",
        choices=("all", "none", "ask"),
        default=None,
        help=(
            "who approves the calls that need it: all (grant every one), none (refuse every "
            "one; the session still finishes), ask (ask at the terminal). Default: ask when "
            "standard input is a terminal, else none (safe)"
        ),
    )
    demo.add_argument(
        "--workdir",
        metavar="DIR",
        default="toolledger-demo",
        help="where to write the project and its log (default: ./toolledger-demo)",
    )
    demo.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        default=None,
        help=(
            "run against a real model instead of the script: openai:MODEL (Chat Completions), "
            "openai-responses:MODEL or anthropic:MODEL; the key comes from OPENAI_API_KEY or "
            "ANTHROPIC_API_KEY. Default: the scripted model, which needs nothing"
        ),
    )
    demo.add_argument(
        "--base-url",
        metavar="URL",
        default=None,
        help="the API's address, for an OpenAI-compatible server (vLLM, llama.cpp, Ollama)",
    )
    demo.add_argument(
        "--code",
        action="store_true",
        help=("the code-mode scene: the model writes one program that reads, tests, writes the "
              "fix (asking for approval) and reviews it, each tool call a nested call of "
              "run_code (needs the codemode extra; scripted model only)"),
    )
    demo.add_argument("--json", action="store_true",
                      help="print the session as `show --json` does, plus the log's path")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Run the demo and print it."""
    if args.code and args.model is not None:
        raise UsageError("--code runs the scripted program: leave out --model")
    if args.base_url is not None and args.model is None:
        raise UsageError("--base-url needs --model: the scripted model calls no server")
    if args.model is not None:
        try:
            check_spec(args.model, base_url=args.base_url)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    return _demo(console, args.approve, args.workdir, as_json=args.json,
                 model=args.model, base_url=args.base_url, code=args.code)


def _approver(choice: str) -> Approver:
    """The approver ``--approve`` names (the choice is already resolved from its default)."""
    if choice == "all":
        return approve_all
    if choice == "none":
        return deny_all
    if not sys.stdin.isatty():
        raise UsageError("--approve ask needs a terminal to ask at; use --approve all or none")
    return terminal_approver()


def _demo(console: Console, approve: str | None, workdir: str, *, as_json: bool = False,
          model: str | None = None, base_url: str | None = None, code: bool = False) -> int:
    note = ""
    if approve is None:
        approve = "ask" if sys.stdin.isatty() else "none"
        if approve == "none":
            note = (": no terminal to ask at, so calls that need approval are refused; "
                    "--approve all grants them")
    approver = _approver(approve)
    if as_json:
        if approve == "ask":
            raise UsageError("--json needs --approve all or none: the terminal is for the JSON")
        run = _run(workdir, approver, model, base_url, code=code)
        print(visible_json({"log": str(run.log_path), "approve": approve,
                            **session_json(run.projection)}))
        return 0
    who = f"model: {model}; " if model is not None else ""
    console.print(Text(f"Running the demo in {workdir} ({who}approvals: {approve}{note})",
                       style="dim"), soft_wrap=True)
    console.print()
    shown = []

    def show_progress(update: ToolProgress, name: str) -> None:
        # as the tools report it, marked as progress: the model never reads it. A forwarded
        # update repeats the one its nested call reported just before, so it is not printed
        if update.source is None:
            console.print(live_line(update, name), soft_wrap=True)
            shown.append(update)

    run = _run(workdir, approver, model, base_url, show_progress, code)
    if shown:
        console.print()
    renderers = Renderers()
    renderers.load()  # the same views as `show` gives the log
    print_session(run.projection, console, renderers,
                  progress_section(run.projection, run.records))
    console.print()
    # soft_wrap: a long path stays on one line, so it can be copied
    console.print(Text.assemble(("Log: ", "bold"), str(run.log_path)), soft_wrap=True)
    console.print(Text(f"Read it again with: {command_name()} show {run.log_path}", style="dim"),
                  soft_wrap=True)
    console.print(Text(f"Open it in the web console with: {command_name()} web {run.log_path}",
                       style="dim"), soft_wrap=True)
    return 0


def _run(workdir: str, approver: Approver, model: str | None, base_url: str | None,
         on_progress: ProgressWatcher | None = None, code: bool = False) -> DemoRun:
    """Run the demo; a bad ``--model`` or a model's error is a usage error with its reason."""
    if code:
        try:
            from ..demo.codescene import run_code_demo

            return trio.run(run_code_demo, workdir, approver, on_progress)
        except CodeModeUnavailable as exc:
            raise UsageError(f"--code: {exc}") from exc
    try:
        return trio.run(partial(run_demo, workdir, approver, model=model, base_url=base_url,
                                on_progress=on_progress))
    except (ImportError, ModelError) as exc:
        raise UsageError(f"--model {model}: {exc}") from exc
