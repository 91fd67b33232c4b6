"""Garbage in the middle of a log is a clear error naming the file and line, and the file is
left exactly as it was.

The log is a real session's (a few calls, nested ones, an approval) written by a
:class:`JsonlStore`. Hypothesis puts one bad line in it, before or instead of a line in the
middle: random bytes, a truncated line, valid JSON of another shape, a record from another
version, a record whose fields have the wrong shape, a line nested too deep, a non-JSON number,
a repeated or moved line; sometimes a torn last line too. Every way in must then say where:

- ``JsonlStore(path)`` and ``read_jsonl`` raise ``CorruptLogError`` with that line;
- ``toolledger show`` exits 1 with ``PATH:LINE`` on stderr (no traceback);
- ``toolledger verify`` exits 1 naming that line;
- and none of them changes a byte of the file.

A line that decodes but tells an impossible story (a result for a call never requested) is
not the store's business: the store opens, and folding it (``Session.open``, ``show``) is a
``LogInconsistency`` naming the record.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from conftest import counting_clock
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine import (
    Annotations,
    LogInconsistency,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.cli import main as cli
from engine.models import FauxModel, faux_text, faux_tool_call
from events import (
    CodecError,
    CorruptLogError,
    JsonlStore,
    Record,
    decode_line,
    encode_line,
    verify_jsonl,
)
from events.codec import decode_stored_line
from events.stores.jsonl import read_jsonl
from events.types import ToolCallCompleted
from tests.faults.checks import SAFE

ROOT = Path(__file__).resolve().parents[2]
SID = "garbage-session"


# -- the log to spoil -------------------------------------------------------------------------


async def write_log(path: Path) -> None:
    @tool(annotations=SAFE)
    async def inner(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("working", {"step": 1})
        return ToolResult(content=[text("inner done")], structured_content={"ok": True})

    @tool(annotations=SAFE)
    async def outer(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("inner", {})
        return ToolResult(content=[text(f"outer saw {outcome.result.text}")])

    @tool(annotations=Annotations(destructive=True))
    async def change(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("changed")])

    model = FauxModel([[faux_tool_call("outer"), faux_tool_call("change", {"what": "x"})],
                       faux_text("done")])
    with JsonlStore(path) as store:
        async with Session.open(store, model=model, tools=[inner, outer, change],
                                approver=approve_all, session_id=SID, create=True,
                                clock=counting_clock()) as session:
            await session.prompt("go")


@pytest.fixture(scope="module")
def clean_log(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("clean") / "log.jsonl"
    trio.run(write_log, path)
    return path.read_bytes()


@contextlib.contextmanager
def log_file(content: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        path.write_bytes(content)
        yield path


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``toolledger ARGV`` in this process: its exit status, stdout and stderr. Anything it
    raises instead of exiting is a failure of the CLI, reported as such."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli(list(argv))
        except Exception as exc:
            raise AssertionError(
                f"toolledger {' '.join(argv)} raised {type(exc).__name__}: {exc} instead of "
                f"exiting with a one-line error") from exc
    return status, out.getvalue(), err.getvalue()


# -- the kinds of garbage ------------------------------------------------------------------------


def reshaped(line: bytes, **changes: Any) -> bytes:
    """A valid line of the log with some envelope fields changed (the hash kept)."""
    obj = json.loads(line)
    obj.update(changes)
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


# JSON values: no NaN or infinity, which Python writes as ``NaN``/``Infinity``, not JSON, so
# that a line holding one is refused as it opens, not when read ("not JSON inside data" in
# tests/stores/test_jsonl_store.py)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8,
)

Garbage = Callable[[bytes], bytes]  # a valid line of the log -> the bad line put near it


def _random_bytes(data: bytes) -> Garbage:
    return lambda line: data.replace(b"\n", b"") + b"\n"


def _truncated(fraction: float) -> Garbage:
    return lambda line: line[: max(0, min(len(line) - 2, int(len(line) * fraction)))] + b"\n"


def _other_json(value: Any) -> Garbage:
    return lambda line: json.dumps(value).encode() + b"\n"


def _fields(changes: dict[str, Any]) -> Garbage:
    return lambda line: reshaped(line, **changes)


def garbage() -> st.SearchStrategy[tuple[str, Garbage]]:
    """A name (for the report) and a bad line made from a good one."""
    return st.one_of(
        st.binary(max_size=200).map(lambda b: ("random bytes", _random_bytes(b))),
        st.floats(0, 1).map(lambda f: ("truncated line", _truncated(f))),
        JSON.filter(lambda v: not isinstance(v, dict) or "v" not in v).map(
            lambda v: ("JSON of another shape", _other_json(v))),
        st.sampled_from([3, 99, 0, -1, "2", True, None, 2.0]).map(
            lambda v: (f"version {v!r}", _fields({"v": v}))),
        st.sampled_from([
            {"v": 1},  # version 1 never wrote a hash
            {"type": "tool_call_exploded"},
            {"extra": 1},
            {"hash": "not hex"},
            {"seq": "3"},
            {"time": "yesterday"},
            {"session_id": None},
        ]).map(lambda c: (f"envelope {sorted(c)}", _fields(c))),
        st.dictionaries(st.sampled_from(["call_id", "text", "result", "name", "metadata"]),
                        JSON, max_size=3).map(lambda d: (f"data {d!r}", _fields({"data": d}))),
    )


# -- the property ------------------------------------------------------------------------------


async def _read_every_session(store: JsonlStore) -> None:
    for session_id in await store.sessions():
        await store.read(session_id)


def assert_refused_at(content: bytes, line: int, *, on_read: bool = False) -> None:
    """Every reader of the log names ``line``, and none changes the file. ``on_read``: the
    line is a record whose envelope is whole and only its event's data is refused, so the
    store opens and refuses it when it is read, with the error the codec gives for it (read
    only: a store that may write would rightly cut a torn last line off as it opens)."""
    with log_file(content) as path:
        if on_read:
            with JsonlStore(path, read_only=True) as store, \
                    pytest.raises(CorruptLogError) as opened:
                trio.run(_read_every_session, store)
            with pytest.raises(CodecError) as codec:
                decode_stored_line(content.splitlines()[line - 1])
            assert str(codec.value) in str(opened.value)
        else:
            with pytest.raises(CorruptLogError) as opened:
                JsonlStore(path)
        assert (opened.value.path, opened.value.line) == (str(path), line), opened.value
        assert f"{path}:{line}:" in str(opened.value)
        assert path.read_bytes() == content

        with pytest.raises(CorruptLogError) as scanned:
            read_jsonl(path)
        assert scanned.value.line == line

        status, _, err = run_cli("show", str(path))
        assert status == 1 and f"{path}:{line}:" in err and "Traceback" not in err, err

        status, out, err = run_cli("verify", str(path))
        assert status == 1, (out, err)
        assert f"{path}:{line}:" in out, out
        assert path.read_bytes() == content


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=garbage(), where=st.integers(2, 1_000), replace=st.booleans(), torn=st.booleans())
def test_garbage_in_the_middle_is_an_error_naming_its_line_and_changes_nothing(
    clean_log: bytes, kind: tuple[str, Garbage], where: int, replace: bool, torn: bool
) -> None:
    name, make = kind
    lines = clean_log.splitlines(keepends=True)
    line = 2 + where % (len(lines) - 2)  # neither the first line nor after the last
    bad = make(lines[line - 1])
    if bad == lines[line - 1]:
        return  # a change that changes nothing (e.g. data replaced by itself)
    spoiled = lines[: line - 1] + [bad] + lines[line if replace else line - 1:]
    content = b"".join(spoiled) + (lines[-1][:20] if torn else b"")
    # Bad data in a whole envelope is refused when read; put before the line it copies, the
    # good line's repeated seq makes the open fail, and that error names the bad line.
    assert_refused_at(content, line, on_read=name.startswith("data ") and replace)


@pytest.mark.parametrize("change", ["repeated", "moved", "another session's seq"])
def test_a_line_out_of_its_place_is_an_error_naming_its_line(clean_log: bytes, change: str) -> None:
    lines = clean_log.splitlines(keepends=True)
    middle = len(lines) // 2
    if change == "repeated":
        lines.insert(middle, lines[middle - 1])
    elif change == "moved":
        lines[middle - 1], lines[middle] = lines[middle], lines[middle - 1]
    else:
        lines[middle - 1] = reshaped(lines[middle - 1], session_id="other")
    assert_refused_at(b"".join(lines), middle if change != "repeated" else middle + 1)


# -- lines that the codec must refuse, and did not ------------------------------------------------


@pytest.mark.parametrize("data", [[], "data", 7, None, True])
def test_a_record_whose_data_is_not_an_object_is_corruption(clean_log: bytes, data: Any) -> None:
    lines = clean_log.splitlines(keepends=True)
    line = len(lines) // 2
    lines[line - 1] = reshaped(lines[line - 1], data=data)
    assert_refused_at(b"".join(lines), line)


def _with_time(value: float) -> Garbage:
    def make(line: bytes) -> bytes:
        obj = json.loads(line)
        obj["time"] = value
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"  # NaN, Infinity
    return make


@pytest.mark.parametrize("name, make", [
    ("a line nested 100 000 deep", lambda line: b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    ("data nested 2 000 deep", lambda line: line.replace(
        b'"data":', b'"data":' + b"[" * 2_000 + b"]" * 2_000 + b',"_":', 1)),
    ("time NaN", _with_time(float("nan"))),
    ("time Infinity", _with_time(float("inf"))),
    ("time -Infinity", _with_time(float("-inf"))),
])
def test_lines_the_codec_cannot_take_are_corruption_too(
    clean_log: bytes, name: str, make: Garbage
) -> None:
    lines = clean_log.splitlines(keepends=True)
    line = len(lines) // 2
    lines[line - 1] = make(lines[line - 1])
    assert_refused_at(b"".join(lines), line)


@example(b'{"v":2,"session_id":"s","seq":1,"time":0,"type":"user_message","data":null}')
@example(b"[" * 100_000 + b"]" * 100_000)
@example(b'{"v":2,"session_id":"s","seq":1,"time":NaN,"type":"user_message","data":{"text":""}}')
@given(st.one_of(st.binary(max_size=300), JSON.map(lambda v: json.dumps(v).encode()),
                 st.builds(lambda data, kind: json.dumps({
                     "v": 2, "session_id": "s", "seq": 1, "time": 1.0, "type": kind,
                     "data": data}).encode(),
                           # data that is not an object has its own test above
                           st.dictionaries(st.text(max_size=12), JSON, max_size=4),
                           st.sampled_from(
                         ["user_message", "tool_call_requested", "tool_call_completed",
                          "session_started", "assistant_message", "tool_progress"]))))
def test_any_line_decodes_or_is_a_codec_error(line: bytes) -> None:
    """The examples are lines the codec let through as another exception, or took."""
    try:
        record, _ = decode_stored_line(line)
    except CodecError:
        return
    assert record.time == record.time, "a line that is not JSON (NaN) was decoded"


# -- what verify calls a torn line --------------------------------------------------------------


def test_verify_names_a_torn_last_line_as_a_torn_write(clean_log: bytes) -> None:
    lines = clean_log.splitlines(keepends=True)
    for cut in (len(lines[-1]) // 3, len(lines[-1]) // 2, len(lines[-1]) - 3):
        with log_file(b"".join(lines[:-1]) + lines[-1][:cut]) as path:
            report = verify_jsonl(path)
            assert report.broken is not None and report.broken.line == len(lines)
            # docs/integrity.md: "the line has no newline at its end" is the torn write
            assert "no newline" in report.broken.problem, report.broken.problem


# -- a line that decodes, in a story that cannot be ---------------------------------------------


def test_a_decodable_record_that_breaks_the_story_is_a_log_inconsistency(
    clean_log: bytes,
) -> None:
    lines = clean_log.splitlines(keepends=True)
    line = len(lines) // 2
    original = decode_line(lines[line - 1])
    forged = ToolCallCompleted(call_id="42.0", result=ToolResult(content=[text("forged")]))
    record = Record(session_id=SID, seq=original.seq, time=original.time, event=forged)
    lines[line - 1] = encode_line(record).encode() + b"\n"
    content = b"".join(lines)
    assert decode_line(lines[line - 1]).event == forged  # the codec takes it

    async def reopen(path: Path) -> None:
        with JsonlStore(path) as store:  # the store checks lines, not stories
            assert len(await store.read(SID)) == len(lines)
            with pytest.raises(LogInconsistency, match=f"record seq {original.seq} "):
                async with Session.open(store, model=FauxModel([]), session_id=SID, create=True):
                    raise AssertionError("opened a session on an impossible log")

    with log_file(content) as path:
        trio.run(reopen, path)
        status, _, err = run_cli("show", str(path))
        assert status == 1 and "inconsistent log" in err and f"seq {original.seq}" in err, err
        status, out, _ = run_cli("verify", str(path))  # the hash no longer matches
        assert status == 1 and f"{path}:{line}:" in out
        assert path.read_bytes() == content


# -- the real command, once -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["show", "verify"])
def test_the_command_exits_1_naming_the_line(clean_log: bytes, command: str) -> None:
    lines = clean_log.splitlines(keepends=True)
    lines.insert(3, b"\x00\xffnot a record\n")
    content = b"".join(lines)
    with log_file(content) as path:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "engine.cli", command, str(path)],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                              check=False)
        assert done.returncode == 1, done
        assert f"{path}:4:" in done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert path.read_bytes() == content
