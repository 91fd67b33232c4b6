"""The end of a log cut anywhere, or followed by bytes that are no log at all.

A real session's log (keyed or not) is cut at a byte Hypothesis picks, as a crash or a copy
can leave it, and sometimes followed by other bytes. Then:

- a cut inside a line leaves a torn line: a store drops it, and keeps every whole line;
- a cut just before a newline leaves a whole record that lacks only its newline: it is kept
  and the newline restored, so no record that was written whole is lost;
- either way the log then verifies (with its key, if it has one) and reads every kept record;
- a tail that does not begin like a record is refused as not a log, and the file is unchanged;
- ``read_jsonl`` and a read-only store read the same records without changing a byte.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import CorruptLogError, JsonlStore, verify_jsonl
from events.stores import read_jsonl
from tests.faults.checks import SAFE

KEY = b"a key for the tails"
SID = "tail-session"


@functools.cache
def whole_log(key: bytes | None) -> bytes:
    @tool(annotations=SAFE)
    async def echo(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("echo ✓")], structured_content={"n": 1})

    async def write(path: Path) -> None:
        model = FauxModel([[faux_tool_call("echo"), faux_tool_call("echo")], faux_text("done")])
        with JsonlStore(path, key=key) as store:
            async with Session.open(store, model=model, tools=[echo], approver=approve_all,
                                    session_id=SID, create=True) as session:
                await session.prompt("go")

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        trio.run(write, path)
        return path.read_bytes()


def open_and_read(path: Path, **options: Any) -> tuple[list[Any], bytes]:
    async def run() -> tuple[list[Any], bytes]:
        with JsonlStore(path, **options) as store:
            return await store.read(SID), store.dropped_tail

    return trio.run(run)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), keyed=st.booleans())
def test_a_log_cut_anywhere_keeps_every_whole_record(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, keyed: bool
) -> None:
    key = KEY if keyed else None
    log = whole_log(key)
    cut = data.draw(st.integers(1, len(log) - 1), label="cut")
    prefix = log[:cut]
    path = tmp_path_factory.mktemp("tail") / "log.jsonl"
    path.write_bytes(prefix)
    complete = prefix.count(b"\n")
    lacks_only_newline = log[cut : cut + 1] == b"\n"
    kept = complete + (1 if lacks_only_newline else 0)

    assert len(read_jsonl(path)) == kept
    assert len(open_and_read(path, key=key, read_only=True)[0]) == kept
    assert path.read_bytes() == prefix  # reading changed nothing

    records, dropped = open_and_read(path, key=key)
    assert len(records) == kept
    if lacks_only_newline:
        assert dropped == b"" and path.read_bytes() == prefix + b"\n"
    else:
        assert prefix.endswith(dropped) and path.read_bytes() == prefix[: len(prefix) - len(dropped)]
    report = verify_jsonl(path, key)
    assert report.ok and report.records == kept


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.binary(min_size=1, max_size=40).filter(
    lambda b: b"\n" not in b and not b'{"v":'.startswith(b[:5])))
def test_a_tail_that_is_no_record_is_refused_and_never_cut(
    tmp_path_factory: pytest.TempPathFactory, tail: bytes
) -> None:
    path = tmp_path_factory.mktemp("tail") / "log.jsonl"
    content = whole_log(None) + tail
    path.write_bytes(content)
    lines = content.count(b"\n") + 1
    for attempt in (lambda: JsonlStore(path), lambda: read_jsonl(path)):
        with pytest.raises(CorruptLogError) as info:
            attempt()
        assert info.value.line == lines
        assert path.read_bytes() == content
