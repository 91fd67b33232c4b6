"""The words of docs/concepts.md's glossary are the names the code uses, and every public name
a rename replaced still works under its old name, with a ``DeprecationWarning`` naming the new."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import engine
import engine.core.policy
from engine import Session, approve_all, tool
from engine.core.lifecycle import CallStage
from engine.core.policy import PolicyDecision, decide
from engine.core.views import StateSnapshot
from engine.models import FauxModel, faux_text, faux_tool_call
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
    assert "PolicyDecision" in engine.core.policy.__all__ and "Verdict" not in engine.core.policy.__all__


def test_the_old_name_of_a_policy_decision_works_and_warns() -> None:
    old_and_new = r"engine\.core\.policy\.Verdict .*engine\.core\.policy\.PolicyDecision"
    with pytest.warns(DeprecationWarning, match=old_and_new) as caught:
        old = engine.core.policy.Verdict
    assert old is PolicyDecision
    assert caught[0].filename == __file__  # the warning points at the code to change
    with pytest.raises(AttributeError):
        engine.core.policy.Nothing  # noqa: B018


async def test_a_calls_policy_decision_is_its_policy_field_and_verdict_warns() -> None:
    session = await one_call_session()
    view = session.calls["1.0"]
    assert view.policy is not None and view.policy.decision == "allow"
    with pytest.warns(DeprecationWarning, match=r"CallView\.verdict .*CallView\.policy") as caught:
        assert view.verdict is view.policy
    assert caught[0].filename == __file__



async def _later(request: engine.ApprovalRequest) -> Any:
    return engine.LATER


@tool(input_schema={"type": "object"})
async def wipe(call, ctx):  # type: ignore[no-untyped-def]
    """Wipes (declares nothing, so it asks)."""
    return engine.ToolResult(content=[engine.text("wiped")])


@pytest.mark.parametrize("keyword", ["granted", "approved"])
async def test_resolve_approval_takes_granted_and_its_old_name_approved_warns(
    keyword: str
) -> None:
    model = FauxModel([faux_tool_call("wipe", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[wipe],
                            approver=_later) as session:
        assert (await session.prompt("wipe")).stop == "paused"
        if keyword == "approved":
            with pytest.warns(DeprecationWarning, match=r"approved=.*granted="):
                await session.resolve_approval("1.0", approved=True)
        else:
            await session.resolve_approval("1.0", granted=True)
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
            await session.resolve_approval("1.0", True, approved=True)
        with pytest.raises(TypeError, match="granted=True or False"):
            await session.resolve_approval("1.0")
        await session.resolve_approval("1.0", False)


async def test_a_calls_terminal_event_is_its_terminal_field_and_outcome_warns() -> None:
    session = await one_call_session()
    view = session.calls["1.0"]
    assert view.terminal is not None and view.status == "completed"
    with pytest.warns(DeprecationWarning, match=r"CallView\.outcome .*CallView\.terminal"):
        assert view.outcome is view.terminal


@pytest.mark.parametrize(("module", "old", "new"), [
    ("engine.core.lifecycle", "CallState", "CallStage"),
    ("engine.core.lifecycle", "next_state", "next_stage"),
    ("engine.core.views", "SessionState", "StateSnapshot"),
    ("engine.core.reducers", "SessionState", "StateSnapshot"),
])
def test_a_call_has_a_stage_a_session_a_state_and_the_old_names_warn(module: str, old: str,
                                                                     new: str) -> None:
    """"State" named four things; a call's place in its lifecycle is its stage, and what
    ``session.state.snapshot()`` returns is a ``StateSnapshot``."""
    namespace = importlib.import_module(module)
    assert new in namespace.__all__ and old not in namespace.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} .*{module}\.{new}"):
        assert getattr(namespace, old) is getattr(namespace, new)


async def test_a_calls_stage_is_its_stage_field_and_state_warns() -> None:
    session = await one_call_session()
    view, live = session.calls["1.0"], session.state.live_calls["1.0"]
    assert view.stage is CallStage.CLOSED and live.stage is CallStage.CLOSED
    for call in (view, live):
        with pytest.warns(DeprecationWarning, match=r"CallView\.state .*CallView\.stage") as caught:
            assert call.state is call.stage
        assert caught[0].filename == __file__
    assert isinstance(session.state, engine.Projection)  # session.state keeps its name
    assert isinstance(session.state.snapshot(), StateSnapshot)


@pytest.mark.parametrize("module", ["engine", "engine.core.handlers"])
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
    ("engine.core.approvals", "ApprovalDecision", "ApprovalAnswer"),
    ("engine.core.approvals", "as_decision", "as_answer"),
])
def test_an_approver_answers_and_the_old_decision_names_warn(module: str, old: str,
                                                             new: str) -> None:
    namespace = importlib.import_module(module)
    assert new in namespace.__all__ and old not in namespace.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} .*{module}\.{new}"):
        assert getattr(namespace, old) is getattr(namespace, new)


# -- the glossary ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"
README = DOCS.parent / "README.md"
PUBLIC = ["engine", "engine.core.approvals", "engine.core.handlers", "engine.models", "engine.core.policy",
          "engine.core.views", "engine.core.lifecycle", "events", "events.types",
          "events.stores.base", "events.stores.pgclaims"]
#: Every module with renamed names, and the fields and keywords renamed beside them.
RENAMED_IN = ["engine", "engine.core.approvals", "engine.core.handlers", "engine.core.policy",
              "engine.core.lifecycle", "engine.core.views", "engine.core.reducers",
              "engine.runtime.session", "events.stores.pgclaims"]
OLD_SPELLINGS = ["CallView.verdict", "CallView.outcome", "approved=", "CallView.state",
                 "lease_seconds", "renew_leases", "events.stores.pglease"]


def glossary() -> list[list[str]]:
    """docs/concepts.md's "Words" table, as rows of cells."""
    text = (DOCS / "concepts.md").read_text(encoding="utf-8")
    section = text.split("\n## Words\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row] for row in rows[1:]]  # without the heading


def held_names() -> set[str]:
    """The class and field names the glossary's last column gives (``Class`` or
    ``Class.field``)."""
    return {name for row in glossary() for name in re.findall(r"`([A-Z]\w*(?:\.\w+)?)`",
                                                                 row[2])}


def find(name: str) -> object:
    owner, _, field = name.partition(".")
    for module in PUBLIC:
        found = getattr(importlib.import_module(module), owner, None)
        if found is not None:
            return getattr(found, field) if field else found
    raise LookupError(name)


def test_every_name_the_glossary_gives_exists() -> None:
    assert len(glossary()) >= 10
    for name in sorted(held_names()):
        find(name)  # raises if the code has no such name


def test_every_new_name_is_in_the_glossary_and_no_old_one_is_a_word() -> None:
    held = held_names()
    for module in RENAMED_IN:
        renames = importlib.import_module(module)._RENAMED
        for old, new in renames.items():
            assert old not in held
            if new[0].isupper():
                assert new in held, f"{new} is not in docs/concepts.md's glossary"
    assert {"CallView.policy", "CallView.terminal", "ApprovalAnswer.granted", "CallView.stage",
            "CallStage", "StateSnapshot", "Projection"} <= held


def test_the_docs_use_an_old_name_only_to_say_it_is_deprecated() -> None:
    old = set(OLD_SPELLINGS)
    for module in RENAMED_IN:
        old |= set(importlib.import_module(module)._RENAMED)
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for paragraph in page.read_text(encoding="utf-8").split("\n\n"):
            used = {name for name in old
                    if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", paragraph)}
            assert not used or "DeprecationWarning" in paragraph, (page.name, used)


# -- claims: one word for a writer's ownership of a session ----------------------------------

ROOT = DOCS.parent
#: The one "lease" the code keeps: the table's name in existing databases (docs/stores.md).
TABLE = "toolledger_leases"
#: Where each old spelling may still be written: the code that serves it, and the docs that
#: list it as deprecated.
OLD_CLAIM_WORDS = {
    "lease_seconds": {"events/stores/postgres.py", "docs/concepts.md", "docs/stores.md"},
    "renew_leases": {"events/stores/postgres.py", "docs/concepts.md", "docs/stores.md"},
    "pglease": {"events/__init__.py", "events/stores/pgclaims.py", "docs/concepts.md",
                "docs/stores.md"},
    "Leases": {"events/stores/pgclaims.py", "docs/concepts.md", "docs/stores.md"},
}
#: Words that merely contain the letters.
NOT_LEASE = re.compile(r"(?i)^_*(re|p)lease")


def lease_words(text: str) -> list[str]:
    """Every word of ``text`` that says "lease"."""
    return [word for word in re.findall(r"(?i)\w*lease\w*", text) if not NOT_LEASE.match(word)]


def test_lease_words_finds_the_word_and_not_its_lookalikes() -> None:
    assert lease_words("A lease, Leases, pglease, renew_leases; released, _release, please") == [
        "lease", "Leases", "pglease", "renew_leases"]


def test_no_code_or_doc_says_lease_but_the_table_and_the_deprecated_spellings() -> None:
    files = [*ROOT.glob("engine/**/*.py"), *ROOT.glob("events/**/*.py"), *DOCS.glob("*.md"),
             README]
    assert len(files) > 50
    found = {}
    for path in files:
        where = path.relative_to(ROOT).as_posix()
        words = [word for word in lease_words(path.read_text(encoding="utf-8"))
                 if word != TABLE and where not in OLD_CLAIM_WORDS.get(word, ())]
        if words:
            found[where] = sorted(set(words))
    assert found == {}


def test_an_old_claim_spelling_appears_only_where_it_is_served_or_listed() -> None:
    seen: dict[str, set[str]] = {word: set() for word in OLD_CLAIM_WORDS}
    for path in [*ROOT.glob("engine/**/*.py"), *ROOT.glob("events/**/*.py"), *DOCS.glob("*.md")]:
        for word in lease_words(path.read_text(encoding="utf-8")):
            if word in seen:
                seen[word].add(path.relative_to(ROOT).as_posix())
    assert seen == OLD_CLAIM_WORDS  # each kept spelling is still served, and still listed


def test_the_claim_module_old_path_and_class_name_work_and_warn() -> None:
    import events.stores.pgclaims as pgclaims

    sys.modules.pop("events.stores.pglease", None)
    with pytest.warns(DeprecationWarning, match=r"events\.stores\.pglease has moved: import "
                                                r"events\.stores\.pgclaims"):
        old = importlib.import_module("events.stores.pglease")
    assert old is pgclaims
    with pytest.warns(DeprecationWarning, match=r"pgclaims\.Leases .*pgclaims\."
                                                r"DatabaseClaims") as caught:
        assert old.Leases is pgclaims.DatabaseClaims
    assert caught[0].filename == __file__
    assert "DatabaseClaims" in pgclaims.__all__ and "Leases" not in pgclaims.__all__


def test_the_glossary_names_the_claim_in_every_store() -> None:
    [row] = [row for row in glossary() if row[0] == "claim"]
    for held in ("EventStore.claim", "Claims", "DatabaseClaims", "JsonlStore", "SqliteStore",
                 "PostgresStore", TABLE):
        assert f"`{held}" in row[2], held
    assert all(row[0] != "lease" for row in glossary())


def test_designs_public_sketch_imports_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from engine import Annotations, Session, ToolResult, approve_all, text, tool  # noqa: F401
        from engine.models import FauxModel, faux_text, faux_tool_call  # noqa: F401
        from events import JsonlStore, MemoryStore  # noqa: F401
    for method in ("on_tool_call", "on_tool_result", "prompt"):
        assert callable(getattr(Session, method))
    assert isinstance(Session.transcript, property) and isinstance(Session.calls, property)
    assert hasattr(engine.CallOutcome, "is_error")
