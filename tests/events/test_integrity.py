"""The hash chain: how lines are sealed, what `verify` catches, and what it cannot."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli import main
from events.codec import encode_line
from events.errors import CorruptLogError
from events.integrity import (
    GENESIS,
    Anchor,
    VerifyReport,
    link,
    seal,
    seal_bytes,
    unseal,
    verify_lines,
)
from events.stores import JsonlStore, MemoryStore, read_jsonl
from events.stores.jsonl import verify_jsonl
from events.types import SCHEMA_VERSION, ApprovalResolved, Record, UserMessage

T0 = 1_767_225_600.0
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "v1"
KEY = b"an HMAC key, 32 bytes or so long"


def rec(session: str, seq: int, text: str | None = None) -> Record:
    return Record(
        session_id=session,
        seq=seq,
        time=T0 + seq,
        event=UserMessage(text=text if text is not None else f"{session} #{seq} ✓"),
    )


# Two sessions interleaved, appended in batches of one and two records.
PLAN: list[tuple[str, list[Record]]] = [
    ("a", [rec("a", 1), rec("a", 2)]),
    ("b", [rec("b", 1)]),
    ("a", [rec("a", 3)]),
    ("b", [rec("b", 2), rec("b", 3)]),
]


def write_log(path: Path, plan: Sequence[tuple[str, list[Record]]], key: bytes | None = None) -> None:
    async def run() -> None:
        with JsonlStore(path, key=key) as store:
            for session, batch in plan:
                await store.append(session, batch, expected_seq=batch[0].seq - 1)

    trio.run(run)


def numbered(data: bytes) -> Iterator[tuple[int, bytes]]:
    return enumerate(data.splitlines(keepends=True), start=1)


def verify_bytes(data: bytes, key: bytes | None = None) -> VerifyReport:
    return verify_lines(numbered(data), key)


def line_of(data: bytes, position: int) -> int:
    """The 1-based line that holds byte ``position`` (its newline included)."""
    return data.count(b"\n", 0, position) + 1


def flip(data: bytes, position: int, mask: int) -> bytes:
    return data[:position] + bytes([data[position] ^ mask]) + data[position + 1 :]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log.jsonl"
    write_log(path, PLAN)
    return path


@functools.cache
def small_log() -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        write_log(path, PLAN)
        return path.read_bytes()


# -- sealing ----------------------------------------------------------------------------------


def test_a_sealed_line_is_the_canonical_line_with_the_hash_appended_last() -> None:
    body = encode_line(rec("s", 1))
    line, digest = seal(body, GENESIS)
    assert line == body[:-1] + f',"hash":"{digest}"}}'
    assert json.loads(line)["hash"] == digest
    # The formula, as an outside verifier would compute it:
    assert digest == hashlib.sha256(GENESIS.encode() + body.encode()).hexdigest()
    keyed, mac = seal(body, GENESIS, KEY)
    assert mac == hmac.new(KEY, GENESIS.encode() + body.encode(), hashlib.sha256).hexdigest()
    assert unseal(line.encode()) == (body.encode(), digest)
    assert unseal(keyed.encode()) == (body.encode(), mac)
    assert unseal(body.encode()) is None
    with pytest.raises(ValueError):
        seal("{}", GENESIS)


def test_each_hash_covers_the_previous_one() -> None:
    body = encode_line(rec("s", 2)).encode()
    assert seal_bytes(body, GENESIS)[1] != seal_bytes(body, "1" * 64)[1]
    assert link("1" * 64, body) != link("1" * 64, body, KEY)


def test_the_store_chains_each_session_on_its_own(log: Path) -> None:
    lines = log.read_bytes().splitlines()
    heads: dict[str, str] = {}
    for raw in lines:
        obj = json.loads(raw)
        body, digest = unseal(raw) or pytest.fail(f"not sealed: {raw!r}")
        assert digest == link(heads.get(obj["session_id"], GENESIS), body)
        heads[obj["session_id"]] = digest
    report = verify_jsonl(log)
    assert report.ok and report.records == report.chained == 6 and report.unchained == 0
    assert {chain.session_id: chain.head for chain in report.sessions} == heads


@pytest.mark.trio
async def test_records_are_the_plain_facts_whatever_the_store(log: Path) -> None:
    memory = MemoryStore()
    with JsonlStore(log) as store:
        for session, batch in PLAN:
            await memory.append(session, batch, expected_seq=batch[0].seq - 1)
        for session in ("a", "b"):
            assert await store.read(session) == await memory.read(session)
            assert await store.read(session) == [r for s, b in PLAN if s == session for r in b]
    assert read_jsonl(log) == [r for _, batch in PLAN for r in batch]


@pytest.mark.trio
async def test_the_head_survives_reopening_and_other_writers(log: Path) -> None:
    with JsonlStore(log) as one, JsonlStore(log) as two:
        assert one.head("a") == verify_jsonl(log).sessions[0].head
        await one.append("a", [rec("a", 4)], expected_seq=3)
        await two.append("a", [rec("a", 5)], expected_seq=4)  # two learns one's head first
        await one.append("c", [rec("c", 1)], expected_seq=0)
        assert one.head("a") == two.head("a") and one.head("nobody") is None
        head = two.head("a")
    report = verify_jsonl(log)
    assert report.ok and report.records == 9
    assert {c.session_id: c.head for c in report.sessions}["a"] == head


@pytest.mark.parametrize("bad", ["ABCD" * 16, "0" * 63, 12, None])
def test_a_hash_of_the_wrong_form_is_corruption(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "log.jsonl"
    lines = small_log().splitlines(keepends=True)
    obj = json.loads(lines[2])
    obj["hash"] = bad
    lines[2] = json.dumps(obj).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(CorruptLogError) as info:
        JsonlStore(path)
    assert info.value.line == 3 and "hash" in info.value.problem
    broken = verify_jsonl(path).broken
    assert broken is not None and broken.line == 3


def test_a_key_must_be_non_empty_bytes(tmp_path: Path) -> None:
    for key in (b"", "text"):
        with pytest.raises(ValueError, match="non-empty bytes"):
            JsonlStore(tmp_path / "log.jsonl", key=key)  # type: ignore[arg-type]


# -- flipping bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0x01, 0x20, 0x80])
def test_every_flipped_byte_of_a_small_log_is_caught_at_its_line(mask: int) -> None:
    data = small_log()
    assert verify_bytes(data).ok
    for position in range(len(data)):
        report = verify_bytes(flip(data, position, mask))
        assert report.broken is not None, f"flip at byte {position} not caught"
        assert report.broken.line == line_of(data, position), (position, report.broken)


def test_a_flip_in_a_record_names_the_record_and_its_hash() -> None:
    data = small_log()
    position = data.index(b"b #2")  # inside the text of session b, seq 2 (line 5)
    report = verify_bytes(flip(data, position, 0x01))
    assert report.broken is not None
    assert (report.broken.line, report.broken.session_id, report.broken.seq) == (5, "b", 2)
    assert report.broken.problem == "hash does not match (the record was changed)"
    assert report.records == 4  # the records before it verified


def test_a_flip_that_breaks_the_json_is_named_by_line() -> None:
    data = small_log()
    lines = data.splitlines(keepends=True)
    position = len(b"".join(lines[:3])) + 1  # the quote after line 4's opening brace
    report = verify_bytes(flip(data, position, 0x01))
    assert report.broken is not None and report.broken.line == 4
    assert "not valid JSON" in report.broken.problem


@functools.cache
def demo_as_v2() -> bytes:
    """The demo corpus session, its records written again by today's store."""
    import tempfile

    records = [attrs.evolve(r, version=SCHEMA_VERSION) for r in read_jsonl(CORPUS / "demo-approve-all.jsonl")]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "log.jsonl"
        write_log(path, [(records[0].session_id, records)])
        return path.read_bytes()


@settings(max_examples=300, deadline=None)
@given(data=st.data(), mask=st.integers(min_value=1, max_value=255))
def test_a_flipped_byte_anywhere_in_the_demo_log_is_caught(data: st.DataObject, mask: int) -> None:
    log = demo_as_v2()
    position = data.draw(st.integers(min_value=0, max_value=len(log) - 1), label="position")
    report = verify_bytes(flip(log, position, mask))
    assert report.broken is not None
    assert report.broken.line == line_of(log, position)


# -- removing, repeating, reordering, inserting -----------------------------------------------


def test_deleting_a_line_is_caught_at_the_next_record_of_its_session() -> None:
    lines = small_log().splitlines(keepends=True)
    claims = [(json.loads(raw)["session_id"], json.loads(raw)["seq"]) for raw in lines]
    last = {session: seq for session, seq in claims}
    for index, (session, seq) in enumerate(claims):
        report = verify_bytes(b"".join(lines[:index] + lines[index + 1 :]))
        if seq == last[session]:
            continue  # the tail of a session: see the anchor tests
        assert report.broken is not None, f"deleting line {index + 1} not caught"
        assert (report.broken.session_id, report.broken.seq) == (session, seq + 1)
        assert "chain broken" in report.broken.problem


def test_repeating_a_line_is_caught_at_the_copy() -> None:
    lines = small_log().splitlines(keepends=True)
    for index in range(len(lines)):
        report = verify_bytes(b"".join(lines[: index + 1] + lines[index:]))
        assert report.broken is not None and report.broken.line == index + 2
        assert "repeated" in report.broken.problem


def test_reordering_a_session_is_caught_but_interleaving_sessions_is_not_covered() -> None:
    lines = small_log().splitlines(keepends=True)
    swapped = lines[:0] + [lines[1], lines[0]] + lines[2:]  # a#2 before a#1
    report = verify_bytes(b"".join(swapped))
    assert report.broken is not None and report.broken.line == 1
    # Lines 2 (a#2) and 3 (b#1) belong to different chains: their file order is no fact.
    across = lines[:1] + [lines[2], lines[1]] + lines[3:]
    assert verify_bytes(b"".join(across)).ok


def test_an_inserted_record_is_caught_even_when_sealed_correctly() -> None:
    lines = small_log().splitlines(keepends=True)
    head_a1 = json.loads(lines[0])["hash"]
    forged, _ = seal(encode_line(rec("a", 2, "forged")), head_a1)
    report = verify_bytes(b"".join(lines[:1] + [forged.encode() + b"\n"] + lines[1:]))
    assert report.broken is not None and report.broken.line == 3  # the real a#2
    assert "repeated" in report.broken.problem


def test_a_record_rewritten_as_version_1_is_caught() -> None:
    lines = small_log().splitlines(keepends=True)
    obj = json.loads(lines[3])  # a#3
    del obj["hash"]
    obj["v"] = 1
    lines[3] = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    report = verify_bytes(b"".join(lines))
    assert report.broken is not None and report.broken.line == 4
    assert "rewritten as version 1" in report.broken.problem


def test_a_session_rewritten_as_version_1_passes_only_as_not_chained() -> None:
    def downgrade(raw: bytes) -> bytes:
        obj = json.loads(raw)
        del obj["hash"]
        return json.dumps(obj | {"v": 1}, separators=(",", ":"), ensure_ascii=False).encode()

    lines = small_log().splitlines()
    first_only = [downgrade(lines[0])] + lines[1:]  # a#1 stripped: a#2 no longer links
    report = verify_bytes(b"\n".join(first_only) + b"\n")
    assert report.broken is not None and report.broken.line == 2
    assert "rewritten as version 1" in (report.broken.hint or "")
    whole = [downgrade(raw) if b'"session_id":"a"' in raw else raw for raw in lines]
    report = verify_bytes(b"\n".join(whole) + b"\n")
    assert report.ok and report.unchained == 3  # what --strict and anchors are for
    anchors = [Anchor(session_id="a", seq=3, hash=json.loads(lines[3])["hash"])]
    report = verify_lines(numbered(b"\n".join(whole) + b"\n"), anchors=anchors)
    assert report.broken is not None and "missing" in report.broken.problem


def test_a_record_without_its_hash_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(encode_line(rec("s", 1)).encode() + b"\n")
    write_log(path, [("s", [rec("s", 2)])])  # the store goes on, from the genesis value
    report = verify_jsonl(path)
    assert report.broken is not None and report.broken.line == 1
    assert "no hash" in report.broken.problem


def test_a_torn_last_line_is_a_broken_link_until_a_store_drops_it(log: Path) -> None:
    whole = log.read_bytes()
    log.write_bytes(whole + encode_line(rec("a", 4)).encode()[:30])
    report = verify_jsonl(log)
    assert report.broken is not None and report.broken.line == 7
    assert "no newline" in report.broken.problem
    JsonlStore(log).close()
    assert log.read_bytes() == whole and verify_jsonl(log).records == 6
    log.write_bytes(whole[:-1])  # a complete record without its newline: not torn
    assert verify_jsonl(log).ok and verify_jsonl(log).records == 6


# -- anchors: what the chain alone cannot see -------------------------------------------------


def anchors_of(report: VerifyReport) -> list[Anchor]:
    return [
        Anchor(session_id=c.session_id, seq=c.last_seq, hash=c.head or "")
        for c in report.sessions
    ]


def test_a_cut_off_tail_passes_the_chain_but_not_an_anchor(log: Path) -> None:
    anchors = anchors_of(verify_jsonl(log))
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-1]))  # b#3 gone
    assert verify_jsonl(log).ok
    report = verify_jsonl(log, anchors=anchors)
    assert report.broken is not None and report.broken.line is None
    assert (report.broken.session_id, report.broken.seq) == ("b", 3)
    assert "removed from its end" in report.broken.problem


def test_an_anchor_still_holds_after_the_log_grew(log: Path) -> None:
    anchors = anchors_of(verify_jsonl(log))
    write_log(log, [("a", [rec("a", 4)]), ("b", [rec("b", 4)])])
    report = verify_jsonl(log, anchors=anchors)
    assert report.ok and report.anchors == 2


def test_a_rewritten_session_does_not_match_its_anchor(log: Path) -> None:
    anchors = anchors_of(verify_jsonl(log))
    rewritten = rewrite(log.read_bytes(), lambda body: body.replace(b"b #2", b"b #X"))
    log.write_bytes(rewritten)
    assert verify_jsonl(log).ok  # a plain chain recomputed by whoever rewrote it
    report = verify_jsonl(log, anchors=anchors)
    assert report.broken is not None and (report.broken.session_id, report.broken.seq) == ("b", 3)
    assert "anchored" in report.broken.problem


# -- HMAC ------------------------------------------------------------------------------------


def rewrite(data: bytes, change: Callable[[bytes], bytes], key: bytes | None = None) -> bytes:
    """Every line's body changed by ``change``, and the whole chain sealed again with ``key``:
    what someone who can rewrite the whole file can do."""
    heads: dict[str, str] = {}
    out = []
    for raw in data.splitlines():
        body, _ = unseal(raw) or pytest.fail("not sealed")
        body = change(body)
        session = json.loads(body)["session_id"]
        line, heads[session] = seal_bytes(body, heads.get(session, GENESIS), key)
        out.append(line + b"\n")
    return b"".join(out)


def test_a_keyed_log_verifies_only_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, PLAN, key=KEY)
    assert verify_jsonl(path, KEY).ok and verify_jsonl(path, KEY).keyed
    plain = verify_jsonl(path)
    assert plain.broken is not None and plain.broken.line == 1
    assert "--key-file" in (plain.broken.hint or "")
    wrong = verify_jsonl(path, b"not the key")
    assert wrong.broken is not None and wrong.broken.line == 1
    assert wrong.broken.problem.startswith("HMAC does not match")
    assert "key is probably wrong" in (wrong.broken.hint or "")


def test_a_whole_file_rewrite_passes_plain_sha256_but_not_the_key(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    approval = Record(
        session_id="a",
        seq=4,
        time=T0,
        event=ApprovalResolved(call_id="1.0", granted=False, reason="no"),
    )
    write_log(path, PLAN + [("a", [approval])], key=KEY)
    forged = rewrite(path.read_bytes(), lambda b: b.replace(b'"granted":false', b'"granted":true'))
    assert b'"granted":true' in forged
    path.write_bytes(forged)
    assert verify_jsonl(path).ok  # the chain is intact: SHA-256 alone proves nothing here
    report = verify_jsonl(path, KEY)
    assert report.broken is not None and report.broken.line == 1
    assert "plain SHA-256" in report.broken.problem
    # Sealed again with the forger's own key: still not ours.
    path.write_bytes(rewrite(forged, lambda b: b, key=b"the forger's key"))
    report = verify_jsonl(path, KEY)
    assert report.broken is not None and report.broken.problem.startswith("HMAC does not match")


def test_a_change_in_a_keyed_log_is_named_after_good_records(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, PLAN, key=KEY)
    data = path.read_bytes()
    path.write_bytes(flip(data, data.index(b"a #3"), 0x01))
    report = verify_jsonl(path, KEY)
    assert report.broken is not None and (report.broken.line, report.broken.seq) == (4, 3)
    assert report.broken.hint is None  # records verified before it: the key is right


def test_sessions_chain_independently(tmp_path: Path) -> None:
    data = small_log()
    only_b = b"".join(raw for raw in data.splitlines(keepends=True) if b'"session_id":"b"' in raw)
    report = verify_bytes(only_b)
    assert report.ok and [c.session_id for c in report.sessions] == ["b"]
    assert verify_lines(numbered(data), session="a").sessions[0].records == 3


# -- streaming -------------------------------------------------------------------------------


def test_verify_reads_lines_lazily_and_stops_at_the_first_break() -> None:
    lines = flip(small_log(), 3, 0x01).splitlines(keepends=True)  # line 1 is broken
    pulled: list[int] = []

    def source() -> Iterator[tuple[int, bytes]]:
        for number, raw in enumerate(lines, start=1):
            pulled.append(number)
            yield number, raw

    report = verify_lines(source())
    assert report.broken is not None and report.broken.line == 1
    assert pulled == [1]


# -- the command ------------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_verifies_and_prints_the_heads(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    status, out, _ = cli(capsys, "verify", str(log))
    assert status == 0
    assert "verified" in out and "6 records in 2 sessions" in out
    for chain in verify_jsonl(log).sessions:
        assert chain.head is not None and chain.head in out
    status, out, _ = cli(capsys, "verify", str(log), "--json")
    report = json.loads(out)
    assert status == 0 and report["ok"] and report["chained"] == 6 and report["broken"] is None
    assert report["sessions"] == [attrs.asdict(c) for c in verify_jsonl(log).sessions]


def test_cli_names_the_first_broken_link(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    data = log.read_bytes()
    log.write_bytes(flip(data, data.index(b"b #2"), 0x01))
    status, out, _ = cli(capsys, "verify", str(log))
    assert status == 1
    assert f"{log}:5" in out and "session b, seq 2" in out and "hash does not match" in out
    status, out, _ = cli(capsys, "verify", str(log), "--json")
    broken = json.loads(out)["broken"]
    assert status == 1 and (broken["line"], broken["session_id"], broken["seq"]) == (5, "b", 2)


def test_cli_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.jsonl"
    write_log(path, PLAN, key=KEY)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    assert cli(capsys, "verify", str(path), "--key-file", str(key_file))[0] == 0
    monkeypatch.setenv("TOOLLEDGER_KEY", KEY.decode())
    assert cli(capsys, "verify", str(path), "--key-env", "TOOLLEDGER_KEY")[0] == 0
    status, out, _ = cli(capsys, "verify", str(path))
    assert status == 1 and "--key-file" in out  # no key: says it may be keyed
    key_file.write_bytes(KEY + b"\n")
    status, out, _ = cli(capsys, "verify", str(path), "--key-file", str(key_file))
    assert status == 1 and "key is probably wrong" in out and "trailing newline" in out
    status, _, err = cli(capsys, "verify", str(path), "--key-file", str(tmp_path / "nope"))
    assert status == 2 and "nope" in err
    status, _, err = cli(capsys, "verify", str(path), "--key-env", "TOOLLEDGER_NO_SUCH_VAR")
    assert status == 2 and "TOOLLEDGER_NO_SUCH_VAR" in err


def test_cli_session_anchor_and_usage(capsys: pytest.CaptureFixture[str], log: Path) -> None:
    status, out, _ = cli(capsys, "verify", str(log), "--session", "b", "--json")
    assert status == 0 and [s["session_id"] for s in json.loads(out)["sessions"]] == ["b"]
    head = verify_jsonl(log).sessions[1].head
    assert cli(capsys, "verify", str(log), "--anchor", f"b:3:{head}")[0] == 0
    status, out, _ = cli(capsys, "verify", str(log), "--anchor", f"b:4:{head}")
    assert status == 1 and "removed from its end" in out
    assert cli(capsys, "verify", str(log), "--session", "zz")[0] == 2
    assert cli(capsys, "verify", str(log), "--anchor", "b:x:y")[0] == 2
    assert cli(capsys, "verify", str(log.with_name("missing.jsonl")))[0] == 2
    assert cli(capsys, "verify", str(log), "--key-file", "k", "--key-env", "K")[0] == 2


def test_cli_strict_refuses_unchained_records(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    shutil.copy(CORPUS / "reference.jsonl", old)
    status, out, _ = cli(capsys, "verify", str(old))
    assert status == 0 and "not chained" in out and "19 records are version 1" in out
    status, out, _ = cli(capsys, "verify", str(old), "--strict")
    assert status == 1 and "not chained" in out

