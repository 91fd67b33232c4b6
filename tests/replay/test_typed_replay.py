"""A session of typed tools re-drives from its log without a divergence: with the recorded
results, and with the tools run again live (their schemas, the arguments their types refuse
and their results are the same today)."""

from __future__ import annotations

import pytest

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from events import MemoryStore, Record
from tests.typed_tools import TYPED


async def typed_log() -> list[Record]:
    store = MemoryStore()
    model = FauxModel([[faux_tool_call("area", {"size": {"width": 2, "height": 3},
                                                "unit": "inch"}),
                        faux_tool_call("label", {"size": {"width": 1}, "words": ["x", "y"]}),
                        faux_tool_call("area", {"size": {"width": 10**400}}),
                        faux_tool_call("area", {"size": {"width": -1}})],
                       faux_text("measured")])
    async with Session.open(store, model=model, tools=TYPED, approver=approve_all,
                            session_id="typed", create=True) as session:
        await session.prompt("measure")
        assert [session.calls[f"1.{n}"].status for n in range(4)] == [
            "completed", "completed", "failed", "failed"]
    return await store.read("typed")


@pytest.mark.parametrize("mode", ["recorded", "live"])
async def test_a_typed_session_redrives_without_divergence(mode: str) -> None:
    records = await typed_log()
    report = await redrive(records, tools=TYPED, tool_mode=mode,  # type: ignore[arg-type]
                           unverified=True)
    assert report.ok, [d.describe() for d in report.divergences]
    assert report.calls == 4
