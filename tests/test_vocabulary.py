"""The words of docs/concepts.md's glossary are the names the code uses, and every public name
a rename replaced still works under its old name, with a ``DeprecationWarning`` naming the new."""

from __future__ import annotations

import importlib

import pytest

import engine
import engine.policy
from engine import Session, approve_all, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.policy import PolicyDecision, decide
from events import MemoryStore
from events.types import Annotations


async def one_call_session() -> Session:
    """A closed session whose one call ran, allowed by the annotations."""

    @tool(input_schema={"type": "object"}, annotations=Annotations(read_only=True,
                                                                  open_world=False))
    async def look(call, ctx):  # type: ignore[no-untyped-def]
        """Looks."""
        return engine.ToolResult(content=[engine.text("seen")])

    model = FauxModel([faux_tool_call("look", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[look],
                            approver=approve_all) as session:
        await session.prompt("look")
    return session


def test_the_policy_decides_a_policy_decision() -> None:
    assert isinstance(decide("x", Annotations()), PolicyDecision)
    assert "PolicyDecision" in engine.policy.__all__ and "Verdict" not in engine.policy.__all__


def test_the_old_name_of_a_policy_decision_works_and_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"engine\.policy\.Verdict .*engine\.policy\."
                                                r"PolicyDecision"):
        old = engine.policy.Verdict
    assert old is PolicyDecision
    with pytest.raises(AttributeError):
        engine.policy.Nothing  # noqa: B018


async def test_a_calls_policy_decision_is_its_policy_field_and_verdict_warns() -> None:
    session = await one_call_session()
    view = session.calls["1.0"]
    assert view.policy is not None and view.policy.decision == "allow"
    with pytest.warns(DeprecationWarning, match=r"CallView\.verdict .*CallView\.policy"):
        assert view.verdict is view.policy



async def _later(request: engine.ApprovalRequest) -> object:
    return engine.LATER


@tool(input_schema={"type": "object"})
async def wipe(call, ctx):  # type: ignore[no-untyped-def]
    """Wipes (declares nothing, so it asks)."""
    return engine.ToolResult(content=[engine.text("wiped")])


@pytest.mark.parametrize("answer", [{"granted": True}, {"approved": True}],
                         ids=["granted", "approved"])
async def test_resolve_approval_takes_granted_and_its_old_name_approved_warns(
    answer: dict[str, bool]
) -> None:
    model = FauxModel([faux_tool_call("wipe", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[wipe],
                            approver=_later) as session:
        assert (await session.prompt("wipe")).stop == "paused"
        if "approved" in answer:
            with pytest.warns(DeprecationWarning, match=r"approved=.*granted="):
                await session.resolve_approval("1.0", **answer)
        else:
            await session.resolve_approval("1.0", **answer)
        await session.resume()
        view = session.calls["1.0"]
        assert view.approval is not None and view.approval.granted
        assert view.status == "completed"


async def test_resolve_approval_refuses_both_spellings_at_once() -> None:
    model = FauxModel([faux_tool_call("wipe", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[wipe],
                            approver=_later) as session:
        await session.prompt("wipe")
        with pytest.raises(TypeError, match="not both"):
            await session.resolve_approval("1.0", True, approved=True)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="granted=True or False"):
            await session.resolve_approval("1.0")
        await session.resolve_approval("1.0", False)


async def test_a_calls_terminal_event_is_its_terminal_field_and_outcome_warns() -> None:
    session = await one_call_session()
    view = session.calls["1.0"]
    assert view.terminal is not None and view.status == "completed"
    with pytest.warns(DeprecationWarning, match=r"CallView\.outcome .*CallView\.terminal"):
        assert view.outcome is view.terminal


@pytest.mark.parametrize("module", ["engine", "engine.handlers"])
@pytest.mark.parametrize(("old", "new"), [("ToolCallEvent", "ToolCallDraft"),
                                          ("ToolResultEvent", "ToolResultDraft")])
def test_a_handlers_input_is_a_draft_and_the_old_event_names_warn(
    module: str, old: str, new: str
) -> None:
    namespace = importlib.import_module(module)
    assert new in namespace.__all__ and old not in namespace.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} .*{module}\.{new}"):
        assert getattr(namespace, old) is getattr(namespace, new)


def test_from_engine_import_an_old_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match="ToolCallDraft"):
        from engine import ToolCallEvent  # noqa: F401


@pytest.mark.parametrize(("module", "old", "new"), [
    ("engine", "ApprovalDecision", "ApprovalAnswer"),
    ("engine.approvals", "ApprovalDecision", "ApprovalAnswer"),
    ("engine.approvals", "as_decision", "as_answer"),
])
def test_an_approver_answers_and_the_old_decision_names_warn(module: str, old: str,
                                                             new: str) -> None:
    namespace = importlib.import_module(module)
    assert new in namespace.__all__ and old not in namespace.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} .*{module}\.{new}"):
        assert getattr(namespace, old) is getattr(namespace, new)
