"""Forged records: someone who can write a keyed log but does not hold its key changes it.

The log is a real session's, paused on a destructive call's approval, written by a keyed
:class:`JsonlStore`. Hypothesis forges it the ways a writer without the key can: append a
record (an approval granted, or a copy of any record) sealed with plain SHA-256, with another
key, with no hash, or as an unchained version 1 record; change a record and reseal the rest of
its session's chain with plain SHA-256 or another key, or not at all; strip the hashes of a
session from some record on and call them version 1; repeat or drop a record. Then:

- ``JsonlStore(path, key=KEY)`` refuses the log with a ``CorruptLogError`` (an
  ``UnverifiedRecordError`` for a link or HMAC that fails) naming a line;
- ``verify_jsonl(path, KEY)`` names that same line as its first broken link;
- nothing opened the file for writing changed a byte of it;
- and resuming the session on it never runs the destructive call.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine import LATER, Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import CorruptLogError, JsonlStore, verify_jsonl
from events.codec import encode_line_bytes
from events.integrity import GENESIS, seal_bytes, unseal
from events.types import ApprovalResolved, Record

KEY = b"the host's key: nobody else has it"
FORGER = b"a key the forger made up"
SID = "forged-session"

Lines = list[bytes]  # a log's lines, without their newlines


class Danger:
    def __init__(self) -> None:
        self.runs: list[str] = []

        @tool(annotations=Annotations(destructive=True))
        async def rm_rf(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(call.call_id)
            return ToolResult(content=[text("gone")])

        @tool(annotations=Annotations(read_only=True, open_world=False))
        async def look(call: Any, ctx: Any) -> ToolResult:
            return ToolResult(content=[text("looked")], structured_content={"n": 1})

        self.specs = [rm_rf, look]


@functools.cache
def paused_log() -> bytes:
    async def later(request: Any) -> Any:
        return LATER

    async def write(path: Path) -> None:
        model = FauxModel([[faux_tool_call("look"), faux_tool_call("rm_rf")], faux_text("done")])
        with JsonlStore(path, key=KEY) as store:
            async with Session.open(store, model=model, tools=Danger().specs, approver=later,
                                    session_id=SID, create=True) as session:
                assert (await session.prompt("clean up")).stop == "paused"

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        trio.run(write, path)
        return path.read_bytes()


# -- what a forger can do ---------------------------------------------------------------------


def body_of(raw: bytes) -> bytes:
    parts = unseal(raw)
    assert parts is not None
    return parts[0]


def canonical(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def seal_as(body: bytes, prev: str, how: str) -> tuple[bytes, str]:
    """``body`` sealed the way ``how`` says, by someone without the key."""
    if how == "plain":
        return seal_bytes(body, prev)
    if how == "forger":
        return seal_bytes(body, prev, FORGER)
    if how == "no hash":
        return body, prev
    obj = json.loads(body)
    return canonical(obj | {"v": 1}), GENESIS  # "version 1": unchained


def reseal(lines: Lines, start: int, how: str) -> Lines:
    """Lines ``start`` on, sealed again by the forger (whose chain starts where the last line
    before ``start`` left it)."""
    out = lines[:start]
    prev = unseal(lines[start - 1])[1] if start > 0 else GENESIS  # type: ignore[index]
    for raw in lines[start:]:
        line, prev = seal_as(body_of(raw), prev, how)
        out.append(line)
    return out


SEALS = st.sampled_from(["plain", "forger", "no hash", "version 1"])


@st.composite
def forgeries(draw: st.DrawFn, lines: Lines) -> Lines:
    """The log's lines, forged one way a writer without the key can."""
    kind = draw(st.sampled_from(["append", "edit", "downgrade", "repeat", "drop"]))
    count = len(lines)
    if kind == "append":
        seq = count + 1
        if draw(st.booleans()):
            event: Any = ApprovalResolved(call_id="1.1", granted=True, reason="forged")
            body = encode_line_bytes(Record(session_id=SID, seq=seq, time=0.0, event=event))[1]
        else:  # any record of the log, again, as the next one
            obj = json.loads(body_of(lines[draw(st.integers(0, count - 1))]))
            body = canonical(obj | {"seq": seq})
        prev = unseal(lines[-1])[1]  # type: ignore[index]
        line, _ = seal_as(body, prev, draw(SEALS))
        return [*lines, line]
    at = draw(st.integers(0, count - 1))
    if kind == "edit":
        obj = json.loads(body_of(lines[at]))
        obj["time"] = obj["time"] + draw(st.integers(1, 10**6))
        changed = lines[:at] + [seal_bytes(canonical(obj), "0" * 64)[0]] + lines[at + 1 :]
        how = draw(st.sampled_from(["plain", "forger", "not at all"]))
        if how == "not at all":  # the old hash kept: only the body changed
            old = unseal(lines[at])[1]  # type: ignore[index]
            changed[at] = canonical(obj)[:-1] + f',"hash":"{old}"}}'.encode()
            return changed
        return reseal(changed, at, how)
    if kind == "downgrade":
        return reseal(lines, at, "version 1")
    if kind == "repeat":
        return lines[: at + 1] + [lines[at]] + lines[at + 1 :]
    assume(at < count - 1)  # a cut-off tail is what anchors are for (docs/integrity.md)
    return lines[:at] + lines[at + 1 :]


def first_difference(original: Lines, forged: Lines) -> int:
    """The 1-based line where the forged log first differs from the original."""
    for number, (a, b) in enumerate(zip(original, forged), start=1):
        if a != b:
            return number
    return min(len(original), len(forged)) + 1


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_keyed_store_refuses_every_forgery_where_verify_does(
    tmp_path: Path, data: st.DataObject
) -> None:
    original = paused_log().splitlines()
    forged = data.draw(forgeries(original), label="forged")
    assume(forged != original)
    path = tmp_path / "log.jsonl"
    content = b"\n".join(forged) + b"\n"
    path.write_bytes(content)

    with pytest.raises(CorruptLogError) as info:
        JsonlStore(path, key=KEY)
    report = verify_jsonl(path, KEY)
    assert report.broken is not None and report.broken.line == info.value.line
    assert info.value.line <= len(forged)
    assert info.value.line >= first_difference(original, forged)
    assert path.read_bytes() == content

    danger = Danger()
    with pytest.raises(CorruptLogError):
        with JsonlStore(path, key=KEY) as store:
            async def resume() -> None:
                async with Session.open(store, model=FauxModel([faux_text("done")]),
                                        tools=danger.specs, approver=approve_all,
                                        session_id=SID, create=True) as session:
                    await session.resume()
            trio.run(resume)
    assert danger.runs == []


def test_the_unforged_log_opens_and_verifies(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(paused_log())
    with JsonlStore(path, key=KEY) as store:
        assert trio.run(store.last_seq, SID) == len(paused_log().splitlines())
    assert verify_jsonl(path, KEY).ok
