"""The demo and the ``toolledger`` command: real tools, a scripted model, one way to print."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import trio
import trio.testing
from conftest import events_of, run_session
from rich.console import Console

from engine import (
    Annotations,
    ApprovalRequest,
    Block,
    Rewrite,
    ToolCall,
    ToolContext,
    ToolResult,
    terminal_approver,
    text,
    tool,
)
from engine.cli import main
from engine.core.handlers import ToolCallDraft
from engine.core.reducers import CallView, Projection, ToolResultEntry, fold
from engine.demo import DEMO_FILES, FIXED_CALC, LOG_NAME, demo_tools, prepare_workspace, run_demo
from engine.models import faux_text, faux_tool_call
from engine.present.render import print_session
from events.codec import encode_line
from events.stores import read_jsonl
from events.types import AssistantMessage, Record, SessionStarted, ToolExecutionStarted, UserMessage

REPO = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``toolledger ARGV`` in this process; the exit status, stdout and stderr."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def demo(capsys: pytest.CaptureFixture[str], workdir: Path, approve: str) -> tuple[str, Projection]:
    """Run the demo; its printed output and the fold of the log it left."""
    status, out, err = cli(capsys, "demo", "--approve", approve, "--workdir", str(workdir))
    assert status == 0, err
    return out, fold(read_jsonl(workdir / LOG_NAME))


def by_name(projection: Projection) -> dict[str, CallView]:
    """The calls by tool name (each tool is called once in the demo)."""
    return {view.name: view for view in projection.calls.values()}


def calls_section(output: str) -> str:
    """The call tree as printed: from its title to the first blank line after it."""
    start = output.index("Calls (")
    end = output.find("\n\n", start)
    return output[start : end if end >= 0 else len(output)].rstrip("\n")


def one_line_error(err: str) -> str:
    """The one line a user error prints, checked to be one line and no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolledger: error: "), err
    assert "Traceback" not in err
    return lines[0]


# -- the demo ----------------------------------------------------------------------------


def test_demo_with_every_approval_fixes_the_project(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    out, state = demo(capsys, workdir, "all")
    calls = by_name(state)

    # the fix was approved, ran, and is on disk
    assert calls["write_file"].status == "completed"
    assert calls["write_file"].approval is not None and calls["write_file"].approval.granted
    assert (workdir / "calc.py").read_text(encoding="utf-8") == FIXED_CALC

    # the failing test run is data: a completed call with the exit code, not an error
    ran = calls["run_command"]
    assert ran.status == "completed" and ran.result is not None
    assert not ran.result.is_error
    assert ran.result.structured_content["exit_code"] == 1
    assert "FAIL test_mean" in ran.result.structured_content["stdout"]

    # review_diff made two nested calls, and both ran under it
    review = calls["review_diff"]
    children = [state.calls[c] for c in state.children(review.call_id)]
    assert [c.name for c in children] == ["run_checks", "failing_tests"]
    assert all(c.parent_id == review.call_id and c.origin == "nested" for c in children)
    assert [c.call_id for c in children] == [f"{review.call_id}/0", f"{review.call_id}/1"]
    assert review.result is not None and review.result.structured_content["ready"] is True
    assert children[1].result is not None
    assert children[1].result.structured_content == {"failing": [], "passed": 2}

    # the transcript has exactly one tool result per top-level call, in order, none nested
    results = [e for e in state.transcript if isinstance(e, ToolResultEntry)]
    assert [r.call_id for r in results] == [v.call_id for v in state.roots()]
    assert len(state.roots()) == 4
    last = state.transcript[-1]
    assert isinstance(last, AssistantMessage) and last.text.startswith("Fixed")
    assert state.open_calls == ()

    # what was printed: the tree with the nested calls indented under review_diff
    tree = calls_section(out)
    assert "write_file  completed" in tree
    assert "asked → granted once, by the approver" in tree
    lines = tree.splitlines()
    review_line = next(i for i, line in enumerate(lines) if "review_diff  completed" in line)
    nested = [line for line in lines[review_line:] if "run_checks  completed" in line
              or "failing_tests  completed" in line]
    indent = len(lines[review_line]) - len(lines[review_line].lstrip("│├└─ "))
    assert len(nested) == 2
    assert all(len(n) - len(n.lstrip("│├└─ ")) > indent for n in nested)
    assert f"Log: {workdir.resolve() / LOG_NAME}" in out


def test_the_demo_prints_the_commands_output_live_marked_as_progress(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out, state = demo(capsys, tmp_path, "all")
    live = out[:out.index("Session ")]  # printed while the session ran, before the summary
    assert [line.strip() for line in live.splitlines() if "│" in line] == [
        "│ PASS test_add", "│ FAIL test_mean: AssertionError: 3.0",  # run_command, unfixed
        "│ calc.py: ok", "│ test_calc.py: ok",                       # review_diff's checks
        "│ PASS test_add", "│ PASS test_mean"]                        # and its tests, fixed
    heads = [line.split() for line in live.splitlines() if line.strip().startswith("progress")]
    assert heads == [["progress", "2.0", "run_command"]] * 2 + [
        ["progress", "4.0/0", "run_checks"]] * 2 + [["progress", "4.0/1", "failing_tests"]] * 2
    # the model read the results alone; review_diff forwarded its children's output
    transcript = out[out.index("Transcript"):out.index("Calls (")]
    assert "calc.py: ok" not in transcript
    review = by_name(state)["review_diff"]
    assert review.progress_count == 4
    section = out[out.index("Progress ("):out.index("Log: ")]
    assert "4.0    review_diff    from 4.0/1: (its output, above)" in section


def test_demo_with_no_approval_runs_nothing_dangerous_and_still_finishes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out, state = demo(capsys, tmp_path, "none")
    calls = by_name(state)
    started = {e.call_id for e in events_of(read_jsonl(tmp_path / LOG_NAME), ToolExecutionStarted)}
    for name in ("write_file", "run_command"):
        view = calls[name]
        assert view.status == "denied"
        assert view.result is not None and view.result.is_error
        assert view.result.text == f"{name} was not approved"
        assert not view.started and view.call_id not in started  # the body never ran
    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == DEMO_FILES["calc.py"]

    # the read-only tools still ran, nested ones included, and the session ended normally
    assert calls["review_diff"].status == "completed"
    failing = calls["failing_tests"]
    assert failing.result is not None and failing.result.is_error  # a failure with data
    assert failing.result.structured_content == {"failing": ["test_mean"], "passed": 1}
    last = state.transcript[-1]
    assert isinstance(last, AssistantMessage) and "could not apply the fix" in last.text
    assert state.open_calls == ()
    assert "run_command was not approved" in out and "write_file was not approved" in out
    assert "Calls (6: 4 completed, 2 denied)" in out


def test_the_policy_reason_names_the_hint_that_makes_run_command_ask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # run_command declares only open_world=False; it asks because destructive is undeclared
    # (MCP default: true). The recorded reason should say so, not cite open_world alone.
    _, state = demo(capsys, tmp_path, "none")
    decision = by_name(state)["run_command"].policy
    assert decision is not None and decision.decision == "ask"
    assert "destructive" in decision.reason


def test_demo_recreates_its_log_and_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "keep.txt").write_text("mine", encoding="utf-8")
    _, first = demo(capsys, tmp_path, "all")
    _, second = demo(capsys, tmp_path, "all")
    records = read_jsonl(tmp_path / LOG_NAME)
    assert {r.session_id for r in records} == {second.session_id} != {first.session_id}
    # the second run started from the buggy file again, so its tests failed first
    ran = by_name(second)["run_command"].result
    assert ran is not None and ran.structured_content["exit_code"] == 1
    assert (tmp_path / "keep.txt").read_text(encoding="utf-8") == "mine"


async def test_terminal_approver_drives_the_demo(tmp_path: Path) -> None:
    questions: list[str] = []
    answers = iter(["maybe", "a", "n"])  # not an answer (asked again), always, no

    def ask(question: str) -> str:
        questions.append(question)
        return next(answers)

    run = await run_demo(tmp_path, terminal_approver(ask=ask))
    calls = by_name(run.projection)
    assert len(questions) == 3
    assert "Allow run_command (call 2.0)?" in questions[0] and questions[0] == questions[1]
    assert "Allow write_file (call 3.0)?" in questions[2]
    granted = calls["run_command"].approval
    assert granted is not None and granted.granted and granted.scope == "session"
    refused = calls["write_file"]
    assert refused.status == "denied" and refused.approval is not None
    assert refused.approval.reason == "refused at the terminal"
    assert (tmp_path / "calc.py").read_text(encoding="utf-8") == DEMO_FILES["calc.py"]
    assert run.projection.session_grants == {"run_command": True}


async def test_cancelling_a_terminal_prompt_does_not_wait_for_the_answer() -> None:
    # Ctrl-C (or any cancellation) while the terminal approver waits for a line must end the
    # wait at once; the line read in the thread is abandoned, not taken as an answer.
    asked, answered = threading.Event(), threading.Event()

    def ask(question: str) -> str:
        asked.set()
        answered.wait()  # a person who has not answered yet
        return "y"

    approver = terminal_approver(ask=ask)
    request = ApprovalRequest(call_id="1.0", name="write_file", arguments={}, reason="asks",
                              annotations=Annotations(destructive=True), origin="model",
                              parent_id=None)
    scope = trio.CancelScope()
    outcome: list[str] = []

    async def prompt() -> None:
        with scope:
            await approver(request)
            outcome.append("answered")
        outcome.append("ended before the answer" if not answered.is_set() else "waited")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prompt)
        await trio.to_thread.run_sync(asked.wait)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        answered.set()  # answer now, so that an approver that kept waiting lets the test end
    assert outcome == ["ended before the answer"]


async def test_read_file_refuses_a_path_outside_the_workspace(tmp_path: Path) -> None:
    workspace = prepare_workspace(tmp_path / "ws")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    state, _, _ = await run_session(
        demo_tools(workspace),
        [[faux_tool_call("read_file", {"path": "../secret.txt"}),
          faux_tool_call("read_file", {"path": str(tmp_path / "secret.txt")}),
          faux_tool_call("read_file", {"path": "calc.py"})],
         faux_text("done")],
    )
    escaped = [state.calls["1.0"], state.calls["1.1"]]
    for view in escaped:
        assert view.status == "failed" and view.result is not None and view.result.is_error
        assert "outside the workspace" in view.result.text
        assert "secret" not in (view.result.structured_content or "")
    inside = state.calls["1.2"].result
    assert inside is not None and inside.text == DEMO_FILES["calc.py"]


async def test_run_command_reports_a_missing_program_as_an_error(tmp_path: Path) -> None:
    workspace = prepare_workspace(tmp_path)

    async def grant(request: ApprovalRequest) -> bool:
        return True

    state, _, _ = await run_session(
        demo_tools(workspace),
        [faux_tool_call("run_command", {"argv": [str(tmp_path / "no-such-program")]}),
         faux_tool_call("run_command", {"argv": [sys.executable, "-c", "print('hi')"]}),
         faux_text("done")],
        approver=grant,
    )
    missing, ok = state.calls["1.0"], state.calls["2.0"]
    assert missing.status == "failed" and missing.result is not None and missing.result.is_error
    assert ok.result is not None and not ok.result.is_error
    assert ok.result.structured_content == {"exit_code": 0, "stdout": "hi\n", "stderr": ""}


# -- show ----------------------------------------------------------------------------------


def test_show_prints_what_the_demo_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    demo_out, state = demo(capsys, tmp_path, "all")
    status, show_out, err = cli(capsys, "show", str(tmp_path / LOG_NAME))
    assert status == 0, err
    assert calls_section(show_out) == calls_section(demo_out)
    assert show_out.strip() in demo_out  # header, transcript and tree alike
    assert state.session_id in show_out


def test_show_every_session_or_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _, first = demo(capsys, tmp_path / "a", "all")
    _, second = demo(capsys, tmp_path / "b", "none")
    both = tmp_path / "both.jsonl"
    both.write_bytes((tmp_path / "a" / LOG_NAME).read_bytes()
                     + (tmp_path / "b" / LOG_NAME).read_bytes())
    ids = [first.session_id, second.session_id]

    status, out, _ = cli(capsys, "show", str(both))
    assert status == 0
    assert out.index(ids[0]) < out.index(ids[1])
    assert out.count("Calls (") == 2

    status, out, _ = cli(capsys, "show", str(both), "--session", ids[1][:12])
    assert status == 0
    assert ids[1] in out and ids[0] not in out and "2 denied" in out

    status, out, err = cli(capsys, "show", str(both), "--session", "no-such-session")
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert "'no-such-session' is not a session" in line and ids[0] in line


def test_show_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nothing.jsonl"
    status, out, err = cli(capsys, "show", str(missing))
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert str(missing) in line and "No such file" in line
    assert not missing.exists()  # show only reads


def test_show_a_corrupt_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "corrupt.jsonl"
    record = Record(session_id="s", seq=1, time=1.0, event=SessionStarted())
    log.write_text(encode_line(record) + "\n" + "{not json\n", encoding="utf-8")
    before = log.read_bytes()
    status, out, err = cli(capsys, "show", str(log))
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert f"{log}:2:" in line and "corrupt record" in line
    assert log.read_bytes() == before


def test_show_an_inconsistent_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "odd.jsonl"
    # every line decodes and the seqs run, but a session must start with session_started
    record = Record(session_id="s", seq=1, time=1.0, event=UserMessage(text="hi"))
    log.write_text(encode_line(record) + "\n", encoding="utf-8")
    status, out, err = cli(capsys, "show", str(log))
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert "inconsistent log" in line and "session_started" in line and str(log) in line


def test_show_an_empty_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_bytes(b"")
    status, out, _ = cli(capsys, "show", str(log))
    assert status == 0 and "holds no sessions" in out


# -- the command line itself -----------------------------------------------------------------


def test_help_names_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = cli(capsys, "--help")
    assert status == 0 and "demo" in out and "show" in out
    status, out, _ = cli(capsys, "demo", "--help")
    assert status == 0 and "--approve" in out and "--workdir" in out


def test_usage_errors_exit_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = cli(capsys, "no-such-command")
    assert status == 2 and "invalid choice" in err
    status, _, err = cli(capsys, "demo", "--approve", "sometimes")
    assert status == 2 and "invalid choice" in err


def test_asking_needs_a_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    status, out, err = cli(capsys, "demo", "--approve", "ask", "--workdir", str(tmp_path))
    assert status == 1 and out == ""
    assert "--approve ask needs a terminal" in one_line_error(err)
    assert not (tmp_path / LOG_NAME).exists()


def test_without_a_terminal_the_demo_refuses_by_default(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    status, out, err = cli(capsys, "demo", "--workdir", str(tmp_path))
    assert status == 0, err
    assert "approvals: none: no terminal to ask at" in out
    state = fold(read_jsonl(tmp_path / LOG_NAME))
    assert {v.name for v in state.calls.values() if v.status == "denied"} == {
        "run_command", "write_file"}


def test_python_dash_m_runs_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "show", str(tmp_path / "missing.jsonl")],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    assert done.returncode == 1
    assert one_line_error(done.stderr).endswith(str(tmp_path / "missing.jsonl"))



# -- rendering -----------------------------------------------------------------------------


@tool(input_schema={"type": "object", "properties": {"word": {"type": "string"}}},
      annotations=Annotations(read_only=True))
async def echo(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Say the word back, in markup-looking brackets; raise for "boom"."""
    word = call.arguments.get("word", "")
    if word == "boom":
        raise ValueError("it went boom")
    return ToolResult(content=[text(f"[bold]{word}[/bold]")])


def guard(draft: ToolCallDraft) -> Block | Rewrite | None:
    """Block "secret", rewrite "hello" to "hi"."""
    word = draft.arguments.get("word")
    if word == "secret":
        return Block(reason="no secrets")
    if word == "hello":
        return Rewrite(arguments={"word": "hi"})
    return None


async def test_the_call_tree_marks_blocks_rewrites_errors_and_leaves_markup_alone() -> None:
    state, _, _ = await run_session(
        [echo],
        [[faux_tool_call("echo", {"word": "secret"}), faux_tool_call("echo", {"word": "hello"}),
          faux_tool_call("echo", {"word": "boom"})],
         faux_text("[red]done[/red]")],
        on_tool_call=[guard],
    )
    buffer = io.StringIO()
    print_session(state, Console(file=buffer, force_terminal=False, width=100))
    out = buffer.getvalue()
    assert "\x1b[" not in out  # plain text, no escape codes
    tree = calls_section(out)
    assert "Calls (3: 1 blocked, 1 completed, 1 failed)" in tree
    assert "1.0  echo  blocked" in tree and "blocked  by guard: no secrets" in tree
    assert "1.1  echo  completed" in tree and 'rewrite  by guard: {"word": "hi"}' in tree
    assert "1.2  echo  failed" in tree and "error    raised: echo failed: ValueError" in tree
    assert "[bold]hi[/bold]" in tree  # the result text is printed as it is, not as markup
    assert "[red]done[/red]" in out
