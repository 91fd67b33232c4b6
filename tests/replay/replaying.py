"""What the replay tests share: the corpus logs, a recorded session, and how to read a report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio
from conftest import by_call
from hypothesis import HealthCheck, Phase, settings
from trio.testing import MockClock

from engine import (
    Annotations,
    PolicyRules,
    Session,
    ToolSpec,
)
from engine.models import FauxModel, FauxStep
from engine.replay import ReplayReport
from events import MemoryStore, Record
from events.stores import read_jsonl
from tests.strategies import counting_clock

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "v1"
CORPUS_LOGS = ["demo-approve-all", "demo-approve-none", "reference", "mixed"]
#: logs of version 2: failures that name a limit, a type or a path, decisions by host rules
V2_LOGS = sorted((ROOT / "tests" / "corpus" / "v2").glob("*.jsonl"))
SAFE = Annotations(read_only=True, open_world=False)

PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                    phases=[phase for phase in Phase if phase is not Phase.explain])


def corpus(name: str) -> list[Record]:
    """The records of a checked-in corpus log (one session each)."""
    return read_jsonl(CORPUS / f"{name}.jsonl")


def explain(report: ReplayReport) -> str:
    """The report in words, for assertion messages."""
    return "\n".join([*(d.describe() for d in report.divergences), *report.notes])


def virtual(function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function(*args)`` in a fresh trio loop on virtual time."""
    return trio.run(function, *args, clock=MockClock(autojump_threshold=0))


async def record_session(
    tools: Sequence[ToolSpec],
    script: Sequence[FauxStep],
    *,
    approver: Any,
    drive: Callable[[Session], Any] | None = None,
    rules: PolicyRules = PolicyRules(),
) -> list[Record]:
    """Run a scripted session (one prompt, or what ``drive`` does) and return its log."""
    store = MemoryStore()
    async with Session.open(store, model=FauxModel(script), tools=tools, approver=approver,
                            rules=rules, session_id="s",
                            create=True, clock=counting_clock()) as session:
        if drive is None:
            await session.prompt("go")
        else:
            await drive(session)
    return await store.read("s")


def same_calls(recorded: Sequence[Record], replayed: Sequence[Record]) -> None:
    """Every call's own events, in order, are the same in both logs (tracebacks aside)."""
    assert by_call(recorded) == by_call(replayed)
