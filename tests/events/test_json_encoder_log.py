"""A log the standard ``json`` encoder wrote (tests/corpus/json-encoder, checked in) verifies,
reads, opens in a store and folds with msgspec's parser in front; and the reference bytes a
record is written as are still that encoder's, so re-encoding a record read back gives the
very bytes its hash covers."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

from engine.core.reducers import fold
from events.codec import encode_stored
from events.integrity import unseal
from events.stores import JsonlStore, read_jsonl
from events.stores.jsonl import verify_jsonl
from events.types import ToolCallCompleted

LOG = Path(__file__).resolve().parents[1] / "corpus" / "json-encoder" / "numbers.jsonl"


def test_the_log_holds_what_the_json_encoder_spells_its_own_way() -> None:
    raw = LOG.read_bytes()
    # 1e+16 and 1e-05 as json writes them (msgspec writes 1e16), an integer past 64 bits,
    # and a line of \u escapes for a lone surrogate
    for spelling in (b"1e+16", b"1e-05", b"1180591620717411303424", b"caf\\udce9"):
        assert spelling in raw


def test_a_json_encoder_log_verifies_and_folds() -> None:
    report = verify_jsonl(LOG)
    assert report.ok and report.records == len(LOG.read_bytes().splitlines())
    assert report.chained == report.records
    records = read_jsonl(LOG)
    state = fold(records)
    assert state.last_seq == len(records) and state.turn == 2 and not state.open_calls
    assert [call.stage.value for call in state.calls.values()] == ["closed", "closed"]
    results = [r.event.result for r in records if isinstance(r.event, ToolCallCompleted)]
    assert [r.structured_content["huge"] for r in results] == [1e16, 1e16]
    assert results[0].structured_content["echo"]["n"] == 2**70
    assert results[0].content[0].text.endswith("caf\udce9")


def test_a_json_encoder_log_opens_in_a_store_and_continues(tmp_path: Path) -> None:
    copy = tmp_path / LOG.name  # a store may cut a torn tail: never open the corpus itself
    shutil.copy(LOG, copy)
    old = read_jsonl(LOG)

    async def run() -> None:
        with JsonlStore(copy) as store:
            assert await store.read("numbers") == old
            await store.append("numbers", [old[0].__class__(
                session_id="numbers", seq=len(old) + 1, time=old[-1].time + 1.0,
                event=old[2].event)], expected_seq=len(old))

    trio.run(run)
    assert verify_jsonl(copy).ok


def test_the_reference_bytes_are_the_json_encoders() -> None:
    """Each record read back encodes to the canonical bytes its hash was computed over."""
    for record, raw in zip(read_jsonl(LOG), LOG.read_bytes().splitlines()):
        unsealed = unseal(raw)
        assert unsealed is not None
        assert encode_stored(record)[0] == unsealed[0]
        assert encode_stored(record, fast=False)[0] == unsealed[0]
