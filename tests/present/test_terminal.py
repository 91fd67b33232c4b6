"""What reaches a terminal: text from a log, a tool or a path is shown, never obeyed.

A log is input. Tool output, arguments, ids, paths and the text of errors can carry terminal
control sequences (set the clipboard, the window title, a hidden link, clear the screen, erase
the report line just printed) and characters that reorder or hide text (bidi overrides, zero
widths, lone surrogates). Every command prints them as visible escapes; none crashes on them.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
import trio
from conftest import run_session
from rich.console import Console
from rich.text import Text

from engine import (
    ApprovalRequest,
    ToolCall,
    ToolContext,
    ToolResult,
    terminal_approver,
    text,
    tool,
)
from engine.cli import main
from engine.core.visible import visible, visible_json
from engine.models import faux_text, faux_tool_call
from engine.present import render
from engine.present.console import VisibleConsole
from engine.present.render import print_session, register_renderer
from events.stores import JsonlStore
from events.types import Annotations

#: Set the clipboard (OSC 52), the window title (OSC 0), a hidden link (OSC 8), clear the screen
#: (CSI 2J) with 7-bit and 8-bit (C1) introducers, then a right-to-left override.
HOSTILE = (
    "\x1b]52;c;ZWNobyBwd25lZA==\x07"
    "\x1b]0;pwned\x1b\\"
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
    "\x1b[2J\x9b2J\x9d0;c1 title\x9c"
    "\u202egnp.exe\u2066\u200b\ufeff\x7f"
)
#: What a forged session id uses to erase the BROKEN line and print a report of its own.
FORGED_ID = "s\x1b[2K\x1b[1Gverified  log.jsonl: 3 records, SHA-256 chain\x1b[8m"
#: rich's own styling, the only escape sequences a terminal output may hold.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def obeyable(output: str) -> list[str]:
    """The characters of ``output`` a terminal would act on or hide, once rich's own colour
    codes are taken out (newlines and tabs are layout)."""
    import unicodedata

    bare = _SGR.sub("", output)
    return [ch for ch in bare if ch not in "\n\t"
            and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


@tool(input_schema={"type": "object"}, annotations=Annotations(read_only=True))
async def hostile(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Answer with control sequences (and a lone surrogate, as fsdecode makes of a file name)."""
    return ToolResult(content=[text(f"out {HOSTILE} \udcff end")])


def hostile_log(path: Path, session_id: str = "s") -> None:
    """A session whose user, arguments and tool output all carry control sequences."""
    async def write() -> None:
        with JsonlStore(path) as store:
            await run_session(
                [hostile],
                [[faux_tool_call("hostile", {"a": HOSTILE})], faux_text(f"said {HOSTILE}")],
                prompt=f"ask {HOSTILE}", store=store,  # type: ignore[arg-type]
                session_id=session_id,
            )

    trio.run(write)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# -- show and transcript -------------------------------------------------------------------


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
@pytest.mark.parametrize("command", ["show", "transcript"])
def test_show_and_transcript_print_control_sequences_as_visible_escapes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    command: str, terminal: bool,
) -> None:
    hostile_log(tmp_path / "log.jsonl")
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("COLUMNS", "300")
    status, out, err = cli(capsys, command, str(tmp_path / "log.jsonl"))
    assert (status, err) == (0, "")
    assert obeyable(out) == []
    assert ("\x1b[" in out) is terminal  # rich still colours a terminal
    plain = _SGR.sub("", out)
    assert r"\x1b]52;c;ZWNobyBwd25lZA==" in plain and r"\x9b2J" in plain
    assert r"\u202egnp.exe" in plain and r"\udcff end" in plain


@pytest.mark.parametrize("command", ["show", "transcript"])
def test_show_json_escapes_what_a_terminal_obeys_and_reads_back_the_same(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    hostile_log(tmp_path / "log.jsonl")
    status, out, err = cli(capsys, command, str(tmp_path / "log.jsonl"), "--json")
    assert (status, err) == (0, "")
    assert obeyable(out) == []
    assert f"ask {HOSTILE}" in strings(json.loads(out))  # the same text, read back


def strings(value: object) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in [key, *strings(item)]]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


# -- verify, fork, replay ------------------------------------------------------------------


def forged_log(path: Path) -> None:
    """A log under a forged session id, with its second record changed after sealing."""
    hostile_log(path, session_id=FORGED_ID)
    data = path.read_bytes()
    assert data.count(b'"ask ') == 1
    path.write_bytes(data.replace(b'"ask ', b'"ASK '))


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_a_forged_session_id_cannot_rewrite_the_report_of_verify(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    terminal: bool,
) -> None:
    forged_log(tmp_path / "log.jsonl")
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
    status, out, err = cli(capsys, "verify", str(tmp_path / "log.jsonl"))
    assert status == 1 and err == ""
    assert obeyable(out) == []
    first = _SGR.sub("", out).splitlines()[0]
    assert first.startswith("BROKEN") and r"\x1b[2K\x1b[1Gverified" in first


@pytest.mark.parametrize("command", ["show", "transcript", "verify", "replay"])
def test_an_id_with_a_newline_stays_on_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    hostile_log(tmp_path / "log.jsonl", session_id="s\nverified  all is well")
    status, out, err = cli(capsys, command, str(tmp_path / "log.jsonl"))
    assert err == ""
    assert r"s\nverified  all is well" in out
    assert not any(line.startswith("verified  all") for line in out.splitlines())


def test_replay_and_fork_print_ids_and_output_as_visible_escapes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hostile_log(tmp_path / "log.jsonl", session_id=FORGED_ID)
    status, out, err = cli(capsys, "replay", str(tmp_path / "log.jsonl"))
    assert err == "" and obeyable(out) == [] and r"\x1b[2K" in out
    status, out, err = cli(capsys, "fork", str(tmp_path / "log.jsonl"), "--at", "2",
                           "--into", str(tmp_path / "fork.jsonl"), "--id", "new\x9b2J")
    assert (status, err) == (0, "")
    assert obeyable(out) == [] and r"new\x9b2J" in out


def test_error_messages_show_hostile_ids_and_paths_as_escapes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hostile_log(tmp_path / "log.jsonl", session_id=FORGED_ID)
    for argv in (["show", str(tmp_path / "log.jsonl"), "--session", "x\x1b]0;t\x07"],
                 ["verify", str(tmp_path / "log.jsonl"), "--session", "x\u202e"],
                 ["show", str(tmp_path / "no\x1b[2J.jsonl")]):
        status, out, err = cli(capsys, *argv)
        assert status in (1, 2) and out == ""
        assert err.startswith("toolledger: error: ") and err.count("\n") == 1
        assert obeyable(err) == [], argv


def test_a_usage_error_quotes_the_command_line_as_visible_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = cli(capsys, "show", "log.jsonl", "\x1b]0;title\x07", "\u202e")
    assert status == 2 and out == ""
    assert obeyable(err) == []
    assert err.splitlines()[-1] == (
        r"toolledger: error: unrecognized arguments: \x1b]0;title\x07 \u202e")


# -- encodings: lone surrogates and non-UTF-8 file names -----------------------------------


@pytest.mark.parametrize("command", [["show"], ["transcript"], ["show", "--json"],
                                     ["transcript", "--json"], ["verify"], ["verify", "--json"],
                                     ["replay"], ["replay", "--json"]])
def test_a_non_utf8_file_name_and_lone_surrogates_print_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / os.fsdecode(b"log-\xff.jsonl")
    hostile_log(path)
    status, out, err = cli(capsys, command[0], str(path), *command[1:])
    assert (status, err) == (0, "")
    assert obeyable(out) == []


def test_fork_of_a_log_with_a_non_utf8_name_prints_where_it_wrote(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / os.fsdecode(b"log-\xff.jsonl")
    hostile_log(path)
    status, out, err = cli(capsys, "fork", str(path), "--at", "2", "--id", "f")
    assert (status, err) == (0, "")
    assert obeyable(out) == [] and r"log-\udcff.jsonl" in out


def test_an_unexpected_error_is_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from engine.cli import show

    def explode(*args: object) -> object:
        raise AssertionError("a bug\x1b[2J")

    monkeypatch.setattr(show, "read_sessions", explode)
    status, out, err = cli(capsys, "show", str(tmp_path / "x.jsonl"))
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("toolledger: error: ")
    assert "AssertionError: a bug" in err and obeyable(err) == []


# -- renderers -------------------------------------------------------------------------------


@pytest.mark.parametrize("returned", [{"not": "renderable"}, 42, None])
async def test_a_renderer_that_returns_no_renderable_is_skipped_with_a_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, returned: object
) -> None:
    register_renderer("hostile", lambda view: returned)  # type: ignore[arg-type,return-value]
    state, _, _ = await run_session([hostile], [[faux_tool_call("hostile", {})], faux_text("ok")])
    buffer = io.StringIO()
    print_session(state, Console(file=buffer, width=120))
    out = buffer.getvalue()
    note = [line for line in out.splitlines() if "the renderer for hostile" in line]
    assert len(note) == 1 and "not a rich renderable" in note[0]
    assert "Traceback" not in out and "out " in out  # the default view is still there


async def test_a_renderer_that_fails_while_printing_is_skipped_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Exploding:
        def __rich_console__(self, console: Console, options: object) -> object:
            raise RuntimeError("late\x1b[2J")

    register_renderer("hostile", lambda view: Exploding())  # type: ignore[arg-type,return-value]
    state, _, _ = await run_session([hostile], [[faux_tool_call("hostile", {})], faux_text("ok")])
    buffer = io.StringIO()
    print_session(state, Console(file=buffer, width=120))
    out = buffer.getvalue()
    assert "the renderer for hostile failed (RuntimeError: late" in out
    assert obeyable(out) == []


# -- the library's own printing --------------------------------------------------------------


async def test_print_session_escapes_on_any_console() -> None:
    state, _, _ = await run_session([hostile], [[faux_tool_call("hostile", {"a": HOSTILE})],
                                                faux_text(HOSTILE)], prompt=HOSTILE)
    buffer = io.StringIO()
    print_session(state, Console(file=buffer, force_terminal=True, width=200))
    assert obeyable(buffer.getvalue()) == []


async def test_the_terminal_approver_asks_in_visible_escapes() -> None:
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return "n"

    approver = terminal_approver(ask)
    await approver(ApprovalRequest(
        call_id="1.0\x9b2J", name="rm\u202efdp", arguments={"path": HOSTILE},
        reason="destructive\x1b]0;title\x07\nAllow? [y]", annotations=Annotations(),
        origin="model",
        parent_id=None,
    ))
    [question] = asked
    assert obeyable(question) == []
    assert r"rm\u202efdp" in question and r"1.0\x9b2J" in question
    assert question.count("\n") == 3  # the reason's newline cannot fake a line of the prompt


# -- the one function ------------------------------------------------------------------------


def test_visible_escapes_exactly_the_characters_a_terminal_obeys_or_hides() -> None:
    import unicodedata

    for code in range(0x110000):
        ch = chr(code)
        category = unicodedata.category(ch)
        shown = visible(ch)
        if ch in "\n\t":
            assert shown == ch and visible(ch, newlines=False) in ("\\n", "\\t")
        elif category in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            assert shown.startswith("\\") and obeyable(shown) == [], hex(code)
        elif shown != ch:  # only what a newer Unicode makes a format character, ahead of time
            assert category == "Cn" and unicodedata.unidata_version < "15", hex(code)


def test_visible_json_reads_back_as_the_same_value() -> None:
    value = {"k\u202e": [HOSTILE, "\udcff", "é"]}
    dumped = visible_json(value)
    assert obeyable(dumped) == [] and "é" in dumped
    assert json.loads(dumped) == value


def test_a_visible_console_keeps_styles_where_the_text_moved() -> None:
    buffer = io.StringIO()
    console = VisibleConsole(file=buffer, force_terminal=True, color_system="standard", width=80)
    console.print(Text.assemble(("a\x1b[2J", "red"), ("b", "green")))
    out = buffer.getvalue()
    assert "\x1b[31ma\\x1b[2J\x1b[0m\x1b[32mb\x1b[0m" in out
