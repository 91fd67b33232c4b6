"""A session of typed tools, read back from its log: the registration records the inferred
schemas, and ``toolledger show`` prints the calls, their arguments and their results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from engine import Session, approve_all, fold
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore
from events.types import ToolRegistered
from tests.typed_tools import TYPED, area


async def write_log(path: Path) -> None:
    model = FauxModel([[faux_tool_call("area", {"size": {"width": 2, "height": 3}}),
                        faux_tool_call("label", {"size": {"width": 1}, "words": ["x"]}),
                        faux_tool_call("area", {"size": {"width": 10**400}})],
                       faux_text("measured")])
    with JsonlStore(path) as store:
        async with Session.open(store, model=model, tools=TYPED, approver=approve_all,
                                session_id="typed", create=True) as session:
            await session.prompt("measure")


async def test_the_log_records_the_inferred_schemas(tmp_path: Path) -> None:
    path = tmp_path / "typed.jsonl"
    await write_log(path)
    with JsonlStore(path) as store:
        records = await store.read("typed")
    registered = {r.event.spec.name: r.event.spec for r in records
                  if isinstance(r.event, ToolRegistered)}
    assert registered["area"] == area.snapshot()
    assert registered["area"].input_schema == area.input_schema
    assert fold(records).tools["area"].output_schema == area.output_schema


def test_show_prints_the_calls_of_typed_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typed.jsonl"
    trio.run(write_log, path)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "area" in out and "label" in out and "is too large for a float" in out
    assert main(["show", str(path), "--json"]) == 0
    [session] = json.loads(capsys.readouterr().out)
    calls = {c["call_id"]: c for c in session["calls"]}
    assert calls["1.0"]["arguments"] == {"size": {"width": 2, "height": 3}}
    assert calls["1.0"]["outcome"]["result"]["structured_content"] == {"result": 6.0}
    assert calls["1.1"]["outcome"]["result"]["structured_content"] == {"width": 1.0,
                                                                       "height": 1.0}
    assert calls["1.2"]["status"] == "failed"
    assert calls["1.2"]["outcome"]["kind"] == "invalid_arguments"
