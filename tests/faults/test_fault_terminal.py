"""Text that tries to drive a terminal is shown by every command, never obeyed, and never
breaks one.

Hypothesis writes a real session whose every free-text field carries
:func:`engine.testing.strategies.terminal_text` (escape sequences, C1 controls, bidi overrides,
zero-width and tag characters, lone surrogates): the session id, the user's prompt, the
arguments, the name of a tool the model made up, a tool's output, a tool's exception, the
approver's reason, and the log's file name (any bytes, as a file system allows). Then it runs
each command on it, printing to a strict UTF-8 stream as a terminal would (with colours or as
a pipe), and checks:

- no command raises: each exits 0, 1 or 2, with nothing or one ``toolledger: error:`` line on
  stderr;
- nothing on stdout or stderr is a character a terminal obeys or hides (rich's own colour
  codes aside);
- what ``--json`` prints parses.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio
from conftest import counting_clock
from hypothesis import given
from hypothesis import strategies as st

from engine import ApprovalAnswer, ApprovalRequest, Session, ToolResult, text, tool
from engine.cli import main as cli
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing import terminal_text
from events import JsonlStore
from events.types import Annotations
from tests.faults.checks import SAFE

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def obeyable(output: str) -> list[str]:
    """What a terminal would act on or hide in ``output``, rich's colour codes taken out."""
    return [ch for ch in _SGR.sub("", output) if ch not in "\n\t"
            and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


async def write_log(path: Path, words: dict[str, str]) -> None:
    @tool(annotations=SAFE)
    async def speak(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text(words["output"])])

    @tool(annotations=SAFE)
    async def fail(call: Any, ctx: Any) -> ToolResult:
        raise RuntimeError(words["error"])

    @tool(annotations=Annotations(destructive=True))
    async def change(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("changed")])

    async def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, reason=words["reason"])

    model = FauxModel([
        [faux_tool_call("speak", {"a": words["arguments"]}), faux_tool_call("fail"),
         faux_tool_call("change"), faux_tool_call(words["tool"])],
        faux_text(words["output"]),
    ])
    with JsonlStore(path) as store:
        async with Session.open(store, model=model, tools=[speak, fail, change], approver=refuse,
                                session_id=words["session"], create=True, clock=counting_clock()) as session:
            await session.prompt(words["prompt"])


@contextlib.contextmanager
def terminal(colours: bool) -> Iterator[None]:
    """Print as a terminal (rich's colours on) or as a pipe."""
    before = os.environ.get("FORCE_COLOR")
    if colours:
        os.environ["FORCE_COLOR"] = "1"
    else:
        os.environ.pop("FORCE_COLOR", None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("FORCE_COLOR", None)
        else:
            os.environ["FORCE_COLOR"] = before


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``toolledger ARGV``, printing to strict UTF-8 streams as a real terminal's are."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = cli(list(argv))
        except BaseException as exc:
            raise AssertionError(f"toolledger {argv!r} raised {type(exc).__name__}: {exc}") from exc
    return status, out.getvalue().decode(), err.getvalue().decode()


FIELDS = ("session", "prompt", "arguments", "output", "error", "reason", "tool")
FILE_NAME = st.binary(min_size=1, max_size=40).map(
    lambda raw: b"log-" + raw.replace(b"/", b"_").replace(b"\0", b"_") + b".jsonl")


@given(words=st.fixed_dictionaries({field: terminal_text(min_size=1) for field in FIELDS}),
       file_name=FILE_NAME, colours=st.booleans())
def test_no_command_obeys_or_breaks_on_text_that_drives_a_terminal(
    words: dict[str, str], file_name: bytes, colours: bool
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, os.fsdecode(file_name))
        trio.run(write_log, Path(path), words)
        commands = [
            ["show", path], ["show", path, f"--session={words['session']}"], ["transcript", path],
            ["show", path, "--json"], ["transcript", path, "--json"],
            ["verify", path], ["verify", path, "--json"],
            ["replay", path], ["replay", path, "--json"],
            ["fork", path, "--at", "3", "--into", os.path.join(directory, "fork.jsonl")],
            ["show", path, f"--session={words['prompt']}?"],  # no such session: an error line
        ]
        with terminal(colours):
            for argv in commands:
                status, out, err = run_cli(*argv)
                assert status in (0, 1, 2), (argv, err)
                assert err == "" or (err.startswith("toolledger: error: ")
                                     and err.count("\n") == 1), (argv, err)
                assert obeyable(out + err) == [], argv
                if "--json" in argv:
                    json.loads(out)
