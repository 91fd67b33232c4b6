"""toolledger's errors form one tree under ``ToolledgerError`` (docs/errors.md).

Every class in the tree is a ``ToolledgerError`` and keeps the built-in base it had before
the tree existed, so an old ``except`` clause still catches it; each documented raise site
raises its class; and docs/errors.md lists exactly the classes of the tree, with their bases.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import engine
import events
from engine import (
    LATER,
    AlreadyRunning,
    ApprovalNotPending,
    ApprovalRequest,
    CallNotFound,
    SchemaError,
    Session,
    SessionClosed,
    SessionInUse,
    SessionNotFound,
    SessionPaused,
    ToolledgerError,
    ToolResult,
    ToolSignatureError,
    text,
    tool,
)
from engine.models import FauxModel, ModelError, faux_text, faux_tool_call
from engine.models.protocol import ModelMessage, ModelRequest
from events import (
    CodecError,
    ConflictError,
    CorruptLogError,
    DatabaseSchemaError,
    JsonlStore,
    MemoryStore,
    SqliteStore,
    decode_line,
)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "errors.md"

#: the built-in base each error kept when the tree was made (none: ``Exception`` only)
BUILT_IN = {
    "SessionPaused": RuntimeError,
    "SessionClosed": RuntimeError,
    "SessionBroken": RuntimeError,
    "AlreadyRunning": RuntimeError,
    "NoModel": RuntimeError,
    "SessionNotFound": LookupError,
    "CallNotFound": ValueError,
    "ApprovalNotPending": ValueError,
    "QuestionNotPending": ValueError,
    "InvalidAnswer": ValueError,
    "CodecError": ValueError,
    "SchemaError": ValueError,
    "ListingError": RuntimeError,
    "ServerChanged": RuntimeError,
    "ToolSignatureError": TypeError,
    "CodeModeUnavailable": ImportError,
}


def import_everything() -> None:
    """Import every module of both packages that imports here (an extra not installed is
    skipped), so that every subclass of ``ToolledgerError`` is defined."""
    for package in (engine, events):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith(".__main__"):  # runs a command
                continue
            try:
                importlib.import_module(info.name)
            except ImportError:
                continue


def the_tree() -> dict[str, type[BaseException]]:
    """Every class of toolledger's that is a ``ToolledgerError``, by name."""
    import_everything()
    found: dict[str, type[BaseException]] = {}
    todo: list[type[BaseException]] = [ToolledgerError]
    while todo:
        cls = todo.pop()
        if cls.__module__.split(".")[0] in ("engine", "events"):
            assert found.setdefault(cls.__name__, cls) is cls, f"two classes named {cls.__name__}"
        todo.extend(cls.__subclasses__())
    return found


TREE = the_tree()


def doc_table() -> dict[str, set[str]]:
    """docs/errors.md's table of errors: each class -> the bases its "is a" column names."""
    rows: dict[str, set[str]] = {}
    lines = DOC.read_text().splitlines()
    start = lines.index("| class | is a | import from | raised when | what to do |")
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = line.strip("|").split("|")
        (name,) = re.findall(r"`(\w+)`", cells[0])
        rows[name] = set(re.findall(r"`(\w+)`", cells[1]))
    return rows


def doc_tree() -> set[str]:
    """The class names drawn in docs/errors.md's tree, built-in bases left out."""
    text_ = DOC.read_text()
    block = text_.split("## The tree", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    return set(re.findall(r"\b[A-Z]\w+", block)) - {"RuntimeError", "ValueError", "LookupError",
                                                       "TypeError", "ImportError"}


# -- the tree --------------------------------------------------------------------------------


def test_the_tree_holds_the_errors_a_caller_meets() -> None:
    assert {"SessionPaused", "SessionClosed", "SessionInUse", "SessionNotFound",
            "CallNotFound", "ApprovalNotPending", "CorruptLogError", "UnverifiedRecordError",
            "ConflictError", "SchemaError", "ModelError"} <= set(TREE)


@pytest.mark.parametrize("name", sorted(TREE))
def test_each_error_is_a_toolledger_error_and_keeps_its_built_in_base(name: str) -> None:
    cls = TREE[name]
    assert issubclass(cls, ToolledgerError)
    built_ins = {base for base in cls.__mro__
                 if base.__module__ == "builtins" and base not in (Exception, BaseException,
                                                                   object)}
    expected = BUILT_IN.get(name)
    assert built_ins == ({expected} if expected else set())


def test_the_public_errors_are_exported() -> None:
    for name in ("ToolledgerError", "SessionError", "SessionPaused", "SessionClosed",
                 "AlreadyRunning", "SessionInUse", "SessionNotFound", "CallError",
                 "CallNotFound", "ApprovalNotPending", "LogError", "SchemaError",
                 "ToolSignatureError"):
        assert name in engine.__all__ and getattr(engine, name) is TREE[name]
    for name in ("ToolledgerError", "SessionError", "LogError", "CodecError", "ConflictError",
                 "CorruptLogError", "UnverifiedRecordError", "SessionInUse", "SessionNotFound"):
        assert name in events.__all__ and getattr(events, name) is TREE[name]


def test_the_doc_lists_exactly_the_classes_of_the_tree_with_their_bases() -> None:
    table = doc_table()
    assert set(table) == set(TREE)
    assert doc_tree() == set(TREE)
    for name, bases in table.items():
        assert bases == {base.__name__ for base in TREE[name].__bases__}, name


# -- where each is raised --------------------------------------------------------------------


@tool()  # no annotations: the policy asks
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Deploys nothing."""
    return ToolResult(content=[text("deployed")])


async def later(request: ApprovalRequest) -> Any:
    return LATER


async def test_a_prompt_while_paused_raises_session_paused() -> None:
    model = FauxModel([faux_tool_call("deploy", {})])
    async with Session.open(MemoryStore(), model=model, tools=[deploy],
                            approver=later) as session:
        assert (await session.prompt("deploy")).stop == "paused"
        with pytest.raises(SessionPaused, match="the session is paused"):
            await session.prompt("and?")


async def test_a_closed_session_raises_session_closed() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        pass
    with pytest.raises(SessionClosed, match="the session is closed"):
        await session.prompt("hello")
    with pytest.raises(SessionClosed, match="the session is closed"):
        await session.resolve_approval("1.0", granted=True)
    with pytest.raises(SessionClosed, match="the session is closed"):
        await session.call_tool("deploy", {})


async def test_an_unknown_call_raises_call_not_found() -> None:
    model = FauxModel([faux_tool_call("deploy", {})])
    async with Session.open(MemoryStore(), model=model, tools=[deploy],
                            approver=later) as session:
        await session.prompt("deploy")
        with pytest.raises(CallNotFound, match="it is unknown"):
            await session.resolve_approval("9.9", granted=True)
        with pytest.raises(CallNotFound, match="is not a host call"):
            await session.resume_call("h7")
        with pytest.raises(CallNotFound, match="is not a host call"):
            await session.resume_call("1.0")  # the model's call, not a host call


async def test_answering_a_call_not_waiting_raises_approval_not_pending() -> None:
    model = FauxModel([faux_tool_call("deploy", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[deploy],
                            approver=later) as session:
        await session.prompt("deploy")
        await session.resolve_approval("1.0", granted=True)
        with pytest.raises(ApprovalNotPending, match="not waiting for an approval"):
            await session.resolve_approval("1.0", granted=True)
        await session.resume()
        with pytest.raises(ApprovalNotPending, match="it is completed"):
            await session.resolve_approval("1.0", granted=False)


@settings(max_examples=25, deadline=None)
@given(call_id=st.text(max_size=12).filter(lambda call_id: call_id != "1.0"))
def test_an_answer_to_any_id_but_the_pending_one_is_call_not_found(call_id: str) -> None:
    """However it is spelled, an id no call has is ``CallNotFound`` (a ``ValueError``),
    names the id, and records nothing; the pending call still takes its answer."""

    async def main() -> None:
        model = FauxModel([faux_tool_call("deploy", {})])
        async with Session.open(MemoryStore(), model=model, tools=[deploy],
                                approver=later) as session:
            await session.prompt("deploy")
            before = session.records
            with pytest.raises(CallNotFound) as info:
                await session.resolve_approval(call_id, granted=True)
            assert isinstance(info.value, ValueError) and f"call {call_id} " in str(info.value)
            assert session.records == before
            await session.resolve_approval("1.0", granted=False)

    trio.run(main)


class GatedModel:
    """A model that answers once ``release`` is set."""

    def __init__(self) -> None:
        self.inner = FauxModel([faux_text("first")])
        self.info = self.inner.info
        self.asked = trio.Event()
        self.release = trio.Event()

    async def complete(self, request: ModelRequest) -> ModelMessage:
        self.asked.set()
        await self.release.wait()
        return await self.inner.complete(request)


async def test_a_second_prompt_while_one_runs_raises_already_running() -> None:
    model = GatedModel()
    async with Session.open(MemoryStore(), model=model) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "first")
            await model.asked.wait()
            with pytest.raises(AlreadyRunning, match="already running"):
                await session.prompt("second")
            with pytest.raises(AlreadyRunning, match="already running"):
                await session.resume()
            model.release.set()


async def test_a_session_not_in_the_store_raises_session_not_found() -> None:
    with pytest.raises(SessionNotFound, match="is not in the store"):
        async with Session.open(MemoryStore(), model=FauxModel([]), session_id="nope"):
            pass


async def test_a_session_open_elsewhere_raises_session_in_use(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "log.jsonl")
    async with Session.open(store, model=FauxModel([]), session_id="s", create=True):
        with pytest.raises(SessionInUse, match="is in use"):
            async with Session.open(store, model=FauxModel([]), session_id="s"):
                pass
    store.close()


async def test_a_refused_schema_raises_schema_error() -> None:
    @tool(input_schema={"type": "object", "$ref": "http://example.com/x.json"})
    async def remote(call: Any, ctx: Any) -> ToolResult:
        """Its schema points at the network."""
        return ToolResult(content=[text("never")])

    with pytest.raises(SchemaError):
        async with Session.open(MemoryStore(), model=FauxModel([]), tools=[remote]):
            pass


def test_a_typed_tool_the_engine_cannot_read_raises_tool_signature_error() -> None:
    with pytest.raises(ToolSignatureError, match="parameter 'path': it has no type") as info:
        @tool
        async def untyped(path, count: int) -> str:  # type: ignore[no-untyped-def]
            """Its first parameter has no type."""
            return str(path)
    assert isinstance(info.value, TypeError)


async def test_a_model_that_fails_raises_model_error() -> None:
    def fails(request: ModelRequest) -> ModelMessage:
        raise ModelError("rate_limited", "slow down", status=429)

    async with Session.open(MemoryStore(), model=FauxModel([fails])) as session:
        with pytest.raises(ModelError, match="slow down"):
            await session.prompt("hello")


async def test_a_corrupt_log_raises_corrupt_log_error(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    store = JsonlStore(path)
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="s",
                            create=True) as session:
        await session.prompt("hello")
    store.close()
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(CorruptLogError, match=r"log.jsonl:2: corrupt record"):
        JsonlStore(path)


async def test_a_stale_append_raises_conflict_error() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="s",
                            create=True) as session:
        await session.prompt("hello")
        records = session.records
    with pytest.raises(ConflictError, match="another writer appended first"):
        await store.append("s", records[1:2], expected_seq=1)  # it ends further on


def test_a_record_that_is_not_json_raises_codec_error() -> None:
    with pytest.raises(CodecError, match="not valid JSON"):
        decode_line(b"{not json")


def test_a_file_that_is_no_database_raises_database_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"not a database " * 20)
    with pytest.raises(DatabaseSchemaError, match="cannot be opened as an SQLite database"):
        SqliteStore(path)
