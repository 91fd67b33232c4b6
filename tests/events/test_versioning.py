"""Old logs keep working: the checked-in version 1 logs read, fold and show as before, can be
continued (and then verify), and every version step goes through one upcaster. The checked-in
version 2 logs read with the facts their messages said in words as fields, the very fields
today's engine records for the same session."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import events.codec as codec
from engine.cli import main
from engine.core.reducers import fold
from events.codec import UPCASTERS, decode_line, decode_record, encode_line, upcast
from events.errors import CodecError, CorruptLogError
from events.integrity import GENESIS, link, unseal
from events.modelturns import ModelRequested, ModelResponded
from events.stores import JsonlStore, MemoryStore, read_jsonl
from events.stores.jsonl import verify_jsonl
from events.types import (
    SCHEMA_VERSION,
    ApprovalResolved,
    AssistantMessage,
    FailureDetail,
    Record,
    SessionStarted,
    UserMessage,
)

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "v1"
V1_LOGS = sorted(CORPUS.glob("*.jsonl"))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def as_current(records: list[Record]) -> list[Record]:
    return [attrs.evolve(record, version=SCHEMA_VERSION) for record in records]


def rewrite_as_current(records: list[Record], path: Path) -> None:
    """The same records, written by today's store (sealed, today's version)."""

    async def run() -> None:
        with JsonlStore(path) as store:
            by_session: dict[str, list[Record]] = {}
            for record in as_current(records):
                by_session.setdefault(record.session_id, []).append(record)
            for session, mine in by_session.items():
                await store.append(session, mine, expected_seq=0)

    trio.run(run)


def test_the_corpus_is_version_1() -> None:
    assert len(V1_LOGS) >= 4 and SCHEMA_VERSION == 3
    for path in V1_LOGS:
        for raw in path.read_bytes().splitlines():
            obj = json.loads(raw)
            assert obj["v"] == 1 and "hash" not in obj


@pytest.mark.parametrize("path", V1_LOGS, ids=lambda p: p.stem)
def test_v1_logs_read_losslessly_and_remember_their_version(path: Path) -> None:
    records = read_jsonl(path)
    lines = path.read_bytes().splitlines()
    assert len(records) == len(lines)
    for record, raw in zip(records, lines):
        assert record.version == 1
        # Nothing was lost or invented: today's codec writes the very same bytes back.
        assert encode_line(record).encode("utf-8") == raw
        assert decode_line(raw) == record


@pytest.mark.parametrize("path", V1_LOGS, ids=lambda p: p.stem)
def test_v1_logs_fold_and_show_like_the_same_records_written_today(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = read_jsonl(path)
    today = tmp_path / path.name
    rewrite_as_current(old, today)
    new = read_jsonl(today)
    assert new == as_current(old) and verify_jsonl(today).ok
    assert fold(old).snapshot() == fold(new).snapshot()
    status, old_out, err = cli(capsys, "show", str(path))
    assert status == 0, err
    status, new_out, err = cli(capsys, "show", str(today))
    assert status == 0, err
    assert old_out == new_out
    assert old[0].session_id in old_out


@pytest.mark.trio
@pytest.mark.parametrize("path", V1_LOGS, ids=lambda p: p.stem)
async def test_v1_logs_open_in_a_store(path: Path, tmp_path: Path) -> None:
    records = read_jsonl(path)
    copy = tmp_path / path.name  # a store may cut a torn tail: never open the corpus itself
    shutil.copy(path, copy)
    with JsonlStore(copy) as store:
        for session in await store.sessions():
            assert await store.read(session) == [r for r in records if r.session_id == session]
            assert store.head(session) is None  # nothing chained yet
    memory = MemoryStore()
    with pytest.raises(CodecError, match="attrs.evolve"):  # stores write today's format only
        await memory.append(records[0].session_id, records[:1], expected_seq=0)


def continued(tmp_path: Path, name: str = "demo-approve-all.jsonl") -> tuple[Path, list[Record]]:
    """A copy of a v1 log whose session this code went on with: a prompt and an answer."""
    path = tmp_path / name
    shutil.copy(CORPUS / name, path)
    old = read_jsonl(path)
    session = old[0].session_id
    turn = fold(old).turn
    more = [
        Record(session_id=session, seq=len(old) + 1, time=old[-1].time + 1,
               event=UserMessage(text="and once more?")),
        Record(session_id=session, seq=len(old) + 2, time=old[-1].time + 2,
               event=AssistantMessage(turn=turn + 1, text="nothing more to do")),
    ]

    async def run() -> None:
        with JsonlStore(path) as store:
            await store.append(session, more[:1], expected_seq=len(old))
            await store.append(session, more[1:], expected_seq=len(old) + 1)

    trio.run(run)
    return path, old + more


def test_a_continued_v1_session_chains_its_new_records_from_genesis(tmp_path: Path) -> None:
    path, records = continued(tmp_path)
    assert read_jsonl(path) == records
    assert [r.version for r in records[-3:]] == [1, SCHEMA_VERSION, SCHEMA_VERSION]
    lines = path.read_bytes().splitlines()
    body, digest = unseal(lines[-2]) or pytest.fail("the first new line is not sealed")
    assert digest == link(GENESIS, body)
    report = verify_jsonl(path)
    assert report.ok
    (chain,) = report.sessions
    assert (chain.chained, chain.unchained, chain.last_seq) == (2, len(records) - 2, len(records))
    assert fold(records).turn == fold(records[:-2]).turn + 1


def test_a_continued_v1_log_shows_and_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, records = continued(tmp_path)
    status, out, err = cli(capsys, "show", str(path))
    assert status == 0 and "nothing more to do" in out, err
    status, out, _ = cli(capsys, "verify", str(path))
    assert status == 0 and "verified" in out
    assert f"{len(records) - 2} records are version 1" in out
    # A change in the chained part is caught, at its line.
    data = path.read_bytes()
    position = data.rindex(b"nothing more")
    path.write_bytes(data[:position] + b"N" + data[position + 1 :])
    status, out, _ = cli(capsys, "verify", str(path))
    assert status == 1 and f"{path}:{len(records)}" in out


# -- the upcaster loop ------------------------------------------------------------------------


def test_upcasters_run_one_version_step_at_a_time() -> None:
    calls: list[int] = []

    def step(version: int, rename: tuple[str, str] | None = None) -> Any:
        def up(obj: dict[str, Any]) -> dict[str, Any]:
            calls.append(version)
            out = {**obj, "v": version + 1}
            if rename:
                out[rename[1]] = out.pop(rename[0])
            return out

        return up

    steps = {1: step(1, ("a", "b")), 2: step(2, ("b", "c")), 3: step(3)}
    original = {"v": 1, "a": 42}
    assert upcast(original, steps, target=4) == {"v": 4, "c": 42}
    assert calls == [1, 2, 3] and original == {"v": 1, "a": 42}  # in order; not mutated
    calls.clear()
    assert upcast({"v": 3, "c": 1}, steps, target=4) == {"v": 4, "c": 1} and calls == [3]
    assert upcast({"v": 4}, steps, target=4) == {"v": 4}
    with pytest.raises(CodecError, match="no upcaster from record version 2"):
        upcast({"v": 2}, {1: step(1)}, target=3)
    with pytest.raises(CodecError, match="returned version 1"):
        upcast({"v": 1}, {1: lambda obj: dict(obj)}, target=2)


def test_decoding_a_v1_record_goes_through_every_upcaster(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (CORPUS / "reference.jsonl").read_bytes().splitlines()[0]
    seen: list[int] = []

    def spy(version: int) -> Any:
        real = UPCASTERS.get(version, lambda obj: {**obj, "v": version + 1})

        def up(obj: dict[str, Any]) -> dict[str, Any]:
            seen.append(version)
            return real(obj)

        return up

    # As if a version 4 had come: one more step, and the old ones unchanged.
    monkeypatch.setattr(codec, "SCHEMA_VERSION", 4)
    for version in (1, 2, 3):
        monkeypatch.setitem(UPCASTERS, version, spy(version))
    record = decode_line(raw)
    assert seen == [1, 2, 3] and record.version == 1
    seen.clear()
    sealed = json.loads(raw) | {"v": 2, "hash": GENESIS}
    assert decode_record(sealed).version == 2 and seen == [2, 3]


def test_a_v1_record_with_a_hash_or_stray_field_is_refused() -> None:
    obj = json.loads((CORPUS / "reference.jsonl").read_bytes().splitlines()[0])
    with pytest.raises(CodecError, match="version 1 never wrote"):
        decode_record(obj | {"hash": GENESIS})
    with pytest.raises(CodecError, match="unexpected field.*'extra'"):
        decode_record(obj | {"extra": 1})


# -- what this code does not know -------------------------------------------------------------


def with_line(tmp_path: Path, line: int, change: dict[str, Any]) -> Path:
    path = tmp_path / "log.jsonl"
    lines = (CORPUS / "reference.jsonl").read_bytes().splitlines(keepends=True)
    obj = json.loads(lines[line - 1]) | change
    lines[line - 1] = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize(
    "change, problem",
    [({"v": 4}, "schema version 4, newer than this toolledger understands (3)"),
     ({"type": "tool_call_teleported"}, "unknown event type 'tool_call_teleported'")],
    ids=["version 4", "unknown type"],
)
def test_what_this_code_does_not_know_is_an_error_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], problem: str
) -> None:
    path = with_line(tmp_path, 7, change)
    before = path.read_bytes()
    for read in (JsonlStore, read_jsonl):
        with pytest.raises(CorruptLogError) as info:
            read(path)
        assert info.value.line == 7 and problem in info.value.problem
        assert str(info.value).startswith(f"{path}:7:")
    with pytest.raises(CodecError, match=problem.split(",")[0]):
        decode_line(before.splitlines()[6])
    broken = verify_jsonl(path).broken
    assert broken is not None and broken.line == 7 and problem in broken.problem
    status, _, err = cli(capsys, "show", str(path))
    assert status == 1 and f"{path}:7:" in err and problem.split(",")[0] in err
    assert path.read_bytes() == before


# -- version 2 logs: what they said in words, version 3 holds as fields --------------------------

V2_LOGS = sorted((CORPUS.parent / "v2").glob("*.jsonl"))


def test_the_v2_corpus_is_version_2_and_sealed() -> None:
    assert V2_LOGS
    for path in V2_LOGS:
        for raw in path.read_bytes().splitlines():
            obj = json.loads(raw)
            assert obj["v"] == 2 and "hash" in obj
        assert verify_jsonl(path).ok


@pytest.mark.parametrize("path", V2_LOGS, ids=lambda p: p.stem)
def test_v2_logs_read_with_their_facts_as_today_records_them(path: Path, tmp_path: Path) -> None:
    """The upcaster reads the old messages once, and gives the very fields today's engine
    records for the same session; nothing else of a record changes."""
    from tests.corpus.scenarios import SCENARIOS, record

    old = read_jsonl(path)
    assert {r.version for r in old} == {2}
    for record_, raw in zip(old, path.read_bytes().splitlines()):
        line = json.loads(encode_line(record_))
        written = json.loads(raw)
        del written["hash"]
        added = {k: v for k, v in line["data"].items() if k not in written["data"]}
        assert {**line, "data": {k: v for k, v in line["data"].items() if k not in added},
                "v": 2} == written
        assert set(added) <= {"rule", "detail"}
    today = tmp_path / path.name
    trio.run(lambda: record(SCENARIOS[path.stem], today, session_id=path.stem))
    # today's engine also records the model's turns, which version 2 did not
    new = [r for r in read_jsonl(today) if not isinstance(r.event, (ModelRequested, ModelResponded))]
    assert len(new) == len(old)

    def by_subject(records: list[Record]) -> dict[str, list[Any]]:
        # concurrent calls may interleave otherwise: each call's events, in order
        found: dict[str, list[Any]] = {}
        for record_ in records:
            found.setdefault(getattr(record_.event, "call_id", ""), []).append(record_.event)
        return found

    def unsaid(event: Any) -> Any:  # what version 2 never said, not even in words
        if isinstance(event, SessionStarted):
            assert event.settings is not None
            return attrs.evolve(event, settings=None)
        if isinstance(event, ApprovalResolved):
            assert event.later is False
            return attrs.evolve(event, later=None)
        return event

    now = {subject: [unsaid(e) for e in events] for subject, events in by_subject(new).items()}
    assert by_subject(old) == now
    events = [r.event for r in old]
    assert sum(getattr(e, "detail", None) is not None for e in events) >= 6
    assert sum(getattr(e, "rule", None) is not None for e in events) >= 3


def v2_line(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"v": 2, "session_id": "s", "seq": 2, "time": 0.0, "type": kind, "data": data,
            "hash": GENESIS}


@pytest.mark.parametrize(("decision", "reason", "rule"), [
    ("deny", "denied by the rule 'rm_*'", "rm_*"),
    ("allow", "allowed by the rule \"it's\"", "it's"),
    ("ask", "the rule 'x' asks", "x"),
    ("ask", "the rule 'x' asks nicely", None),  # not the policy's words
    ("allow", "allowed by the rule 'a' + 'b'", None),  # an expression, not one literal
    ("deny", "allowed by the rule 'x'", None),  # another decision's words
])
def test_the_upcaster_reads_an_old_reason_for_its_rule_once(
    decision: str, reason: str, rule: str | None
) -> None:
    data = {"call_id": "1.0", "decision": decision, "reason": reason}
    assert decode_record(v2_line("policy_decided", data)).event.rule == rule
    # a version 2 line that has the field already keeps it
    kept = decode_record(v2_line("policy_decided", data | {"rule": "kept"}))
    assert kept.event.rule == "kept"
    denied = {"call_id": "1.0", "reason": reason, "by": "policy",
              "result": {"content": [], "structured_content": None, "is_error": True}}
    assert decode_record(v2_line("tool_call_denied", denied)).event.rule == (
        rule if decision == "deny" else None)


@pytest.mark.parametrize(("kind", "message", "detail"), [
    ("depth_limit", "nested calls may go 3 deep; 1.0/0/0/0/0 is deeper", FailureDetail(limit=3)),
    ("too_large", "t was not run: its arguments take 20 bytes, over the limit of 10",
     FailureDetail(limit=10, size=20)),
    ("too_large", "t returned 20 bytes, over the limit of 10; the result was not kept",
     FailureDetail(limit=10, size=20)),
    ("invalid_output", "t returned NoneType, not a ToolResult", FailureDetail(type="NoneType")),
    ("invalid_output", "t returned output that violates its output schema: x", None),
    ("not_serialisable", "t returned a result that is not JSON: $.a[1]: a set is not a JSON "
     "value", FailureDetail(path=("a", 1), problem="type", type="set")),
    ("not_serialisable", "t returned a result that is not JSON: $: object key (1, 2) is not a "
     "string", FailureDetail(path=(), problem="key", value="(1, 2)")),
    ("invalid_arguments", "Invalid arguments for t: not JSON ($.x: -inf is not a JSON number)",
     FailureDetail(path=("x",), problem="number", value="-inf")),
    ("invalid_arguments", "Invalid arguments for t: data.n must be integer", None),
    ("not_serialisable", "t returned a result that is not JSON: $[99999999999]: a set is not a "
     "JSON value", None),  # an index longer than any bound: not read
    ("raised", "t failed: ValueError: $.a: a set is not a JSON value", None),
])
def test_the_upcaster_reads_an_old_failure_message_for_its_detail_once(
    kind: str, message: str, detail: FailureDetail | None
) -> None:
    data = {"call_id": "1.0/0/0/0/0", "kind": kind, "message": message,
            "result": {"content": [], "structured_content": None, "is_error": True},
            "error": None, "returned": None}
    assert decode_record(v2_line("tool_call_failed", data)).event.detail == detail
