"""Values from untrusted code: progress reports, approver answers, handler verdicts, tool results.

Each either reaches the log intact, as JSON that reads back equal to what the live session
holds, or is refused for its one call (fail closed), never by breaking the session.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    Annotations,
    ApprovalAnswer,
    Block,
    ResourceLink,
    Rewrite,
    Session,
    ToolResult,
    ToolSpec,
    approve_all,
    text,
    tool,
)
from engine.core.reducers import fold
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing import counting_clock
from engine.testing.scripts import (
    SCRIPT_SESSION_ID as SESSION_ID,
)
from events import JsonlStore, decode_line, encode_line
from tests.strategies import PROPERTY

# -- untrusted values from tools, handlers and approvers ---------------------------------------
#
# Whatever a tool reports, a tool_call handler returns or an approver answers, the session must
# go on: each such value either enters the log as JSON that reads back equal to what the live
# session holds, or is refused for that one call (fail closed), never by breaking the session.

json_leaves = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4),
                        st.floats(allow_nan=False, allow_infinity=False, width=32))
json_like = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),  # JSON arrays, spelled as Python tuples
        st.dictionaries(st.text(max_size=3), children, max_size=3),
    ),
    max_leaves=6,
)
not_json = st.one_of(
    st.frozensets(st.integers(0, 3), max_size=2),
    st.just(float("nan")),
    st.dictionaries(st.integers(0, 3), st.integers(), min_size=1, max_size=2),
    st.builds(object),
)
anything = st.one_of(json_like, not_json)


class Probe:
    """A session with one batch [target, sibling] on a JSONL store, and what came of it."""

    def __init__(self, *, approver: Any = None, handler: Any = None,
                 progress: tuple[Any, Any] | None = None, returns: Any = None,
                 nested: tuple[str, Any] | None = None,
                 target_annotations: Annotations = Annotations()) -> None:
        self.approver = approver or approve_all
        self.handler = handler
        self.progress = progress
        self.returns = returns
        self.nested = nested
        self.nested_outcome: Any = None
        self.target_annotations = target_annotations
        self.target_runs = 0

    def tools(self) -> list[ToolSpec]:
        @tool(name="target", input_schema={"type": "object"},
              annotations=self.target_annotations)
        async def target(call: Any, ctx: Any) -> ToolResult:
            self.target_runs += 1
            if self.progress is not None:
                ctx.report_progress(*self.progress)
            if self.nested is not None:
                self.nested_outcome = await ctx.execute_tool(*self.nested)
            await trio.lowlevel.checkpoint()
            if self.returns is not None:
                return self.returns()
            return ToolResult(content=[text("target ran")])

        @tool(name="sibling", annotations=Annotations(read_only=True, open_world=False))
        async def sibling(call: Any, ctx: Any) -> ToolResult:
            await trio.lowlevel.checkpoint()
            return ToolResult(content=[text("sibling ran")])

        return [target, sibling]

    async def run(self, path: str) -> None:
        model = FauxModel([[faux_tool_call("target", {"x": 1}), faux_tool_call("sibling")],
                           faux_text("done")])
        store = JsonlStore(path)
        try:
            async with Session.open(store, model=model, tools=self.tools(),
                                    approver=self.approver, clock=counting_clock(),
                                    new_session_id=lambda: SESSION_ID) as session:
                if self.handler is not None:
                    session.on_tool_call(self.handler)
                try:
                    await session.prompt("go")
                except Exception as exc:
                    pytest.fail(f"the session broke: {describe(exc)}")
                self.live = tuple(session.records)
                self.snapshot = session.state.snapshot()
                self.statuses = {c: v.status for c, v in session.calls.items()}
        finally:
            store.close()
        reopened = JsonlStore(path)
        try:
            self.stored = tuple(await reopened.read(SESSION_ID))
        finally:
            reopened.close()

    def check(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            trio.run(self.run, os.path.join(tmp, "probe.jsonl"))
        assert self.statuses["1.1"] == "completed", "a sibling suffered"
        for record in self.live:
            assert decode_line(encode_line(record)) == record, (
                f"{type(record.event).__name__} does not survive the codec")
        assert self.stored == self.live
        assert fold(self.stored).snapshot() == self.snapshot


def describe(exc: BaseException) -> str:
    """An exception, with the leaves of an exception group spelled out."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(leaf) for leaf in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


UNTRUSTED = settings(PROPERTY, max_examples=max(10, settings.default.max_examples * 4 // 5))


@UNTRUSTED
@given(message=st.one_of(st.none(), st.text(max_size=5), st.integers()), data=anything)
def test_whatever_a_tool_reports_as_progress_the_log_reads_back_as_the_session_saw_it(
    message: Any, data: Any
) -> None:
    probe = Probe(progress=(message, data),
                  target_annotations=Annotations(read_only=True, open_world=False))
    probe.check()
    assert probe.target_runs == 1


def test_progress_data_given_as_a_tuple_reads_back_equal() -> None:
    # the smallest case of the property above
    probe = Probe(progress=("half", {"done": (1, 2)}),
                  target_annotations=Annotations(read_only=True, open_world=False))
    probe.check()


def test_a_progress_message_that_is_not_text_does_not_break_the_session() -> None:
    probe = Probe(progress=(50, None),
                  target_annotations=Annotations(read_only=True, open_world=False))
    probe.check()


@attrs.frozen
class DecisionFields:
    """The fields of an ApprovalAnswer the approver builds when asked (building checks
    them, so a malformed one raises inside the approver, as it would in real code)."""

    granted: Any
    scope: Any
    reason: Any

    def build(self) -> ApprovalAnswer:
        return ApprovalAnswer(granted=self.granted, scope=self.scope, reason=self.reason)


answers = st.one_of(
    st.booleans(), st.none(), st.integers(0, 2), st.text(max_size=3),
    st.builds(
        DecisionFields,
        granted=st.one_of(st.booleans(), st.just("yes"), st.integers(0, 1), st.none()),
        scope=st.sampled_from(["once", "session", "forever", None]),
        reason=st.one_of(st.none(), st.text(max_size=4), st.integers()),
    ),
)


def clear_grant(answer: Any) -> bool:
    """An answer that grants without doubt: True, or a well-formed granting decision."""
    if answer is True:
        return True
    return (isinstance(answer, DecisionFields) and answer.granted is True
            and answer.scope in ("once", "session")
            and (answer.reason is None or isinstance(answer.reason, str)))


@UNTRUSTED
@given(answer=answers)
def test_whatever_an_approver_answers_the_session_goes_on_and_only_a_grant_runs(
    answer: Any,
) -> None:
    async def approver(request: Any) -> Any:
        return answer.build() if isinstance(answer, DecisionFields) else answer

    probe = Probe(approver=approver)  # unannotated: the policy asks
    probe.check()
    if probe.target_runs:
        assert clear_grant(answer), f"{answer!r} ran the call"
    if clear_grant(answer):
        assert probe.target_runs == 1


def test_an_approver_scope_outside_once_and_session_does_not_break_the_session() -> None:
    async def approver(request: Any) -> Any:
        return ApprovalAnswer(granted=True, scope="forever")  # type: ignore[arg-type]

    Probe(approver=approver).check()


def test_an_approver_granted_that_is_not_a_bool_refuses() -> None:
    async def approver(request: Any) -> Any:
        return ApprovalAnswer(granted="yes")  # type: ignore[arg-type]

    probe = Probe(approver=approver)
    probe.check()
    assert probe.target_runs == 0
    assert probe.statuses["1.0"] == "denied"


@attrs.frozen
class BlockReason:
    """A Block the handler builds when called (building checks the reason)."""

    reason: Any


verdicts = st.one_of(
    st.none(),
    st.builds(BlockReason, reason=st.one_of(st.text(max_size=4), st.none(), st.integers())),
    st.builds(Rewrite, arguments=anything),
    st.integers(), st.text(max_size=3), st.builds(object),
)


@UNTRUSTED
@given(verdict=verdicts)
def test_whatever_a_tool_call_handler_returns_the_session_goes_on(verdict: Any) -> None:
    def handler(event: Any) -> Any:
        if event.name != "target":
            return None
        return Block(verdict.reason) if isinstance(verdict, BlockReason) else verdict

    probe = Probe(handler=handler, target_annotations=Annotations(read_only=True))
    probe.check()
    if verdict is None:
        assert probe.target_runs == 1
    elif probe.target_runs:
        assert isinstance(verdict, Rewrite) and isinstance(verdict.arguments, dict)


def test_a_block_whose_reason_is_not_text_still_blocks_without_breaking_the_session() -> None:
    def handler(event: Any) -> Any:
        return Block(reason=None) if event.name == "target" else None  # type: ignore[arg-type]

    probe = Probe(handler=handler, target_annotations=Annotations(read_only=True))
    probe.check()
    assert probe.target_runs == 0
    assert probe.statuses["1.0"] == "blocked"


# text that UTF-8 cannot encode: lone surrogates, as os.fsdecode makes of undecodable file names
odd_text = st.text(st.one_of(st.characters(max_codepoint=0x7F),
                             st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)),
                   max_size=4)
odd_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), odd_text),
    lambda children: st.one_of(st.lists(children, max_size=2),
                               st.dictionaries(odd_text, children, max_size=2)),
    max_leaves=4,
)


@UNTRUSTED
@given(
    content=odd_text,
    structured=odd_json,
    size=st.one_of(st.none(), st.integers(0, 9), st.booleans()),
    kind=st.sampled_from(["text", "structured", "link", "not_a_result"]),
)
def test_whatever_a_tool_returns_the_session_goes_on(
    content: str, structured: Any, size: Any, kind: str
) -> None:
    def returns() -> Any:
        if kind == "text":
            return ToolResult(content=[text(content)])
        if kind == "structured":
            return ToolResult(content=[text("data")], structured_content=structured)
        if kind == "link":
            return ToolResult(content=[ResourceLink(uri="file:///x", name="x", size=size)])
        return {"content": content}

    probe = Probe(returns=returns, target_annotations=Annotations(read_only=True))
    probe.check()
    assert probe.target_runs == 1
    assert probe.statuses["1.0"] in ("completed", "failed")


def test_a_tool_result_text_with_a_lone_surrogate_does_not_break_the_session() -> None:
    # os.listdir() of a directory with a non-UTF-8 file name gives such text
    probe = Probe(returns=lambda: ToolResult(content=[text("caf\udce9.txt")]),
                  target_annotations=Annotations(read_only=True))
    probe.check()
    assert probe.statuses["1.0"] in ("completed", "failed")


def test_a_resource_link_with_a_bool_size_does_not_break_the_session() -> None:
    probe = Probe(returns=lambda: ToolResult(
        content=[ResourceLink(uri="file:///x", name="x", size=True)]),
        target_annotations=Annotations(read_only=True))
    probe.check()
    assert probe.statuses["1.0"] in ("completed", "failed")


def test_nested_arguments_with_a_lone_surrogate_reach_the_tool_and_the_log() -> None:
    # the codec escapes what UTF-8 cannot hold, so such text is data like any other
    probe = Probe(nested=("sibling", {"name": "caf\udce9"}),
                  target_annotations=Annotations(read_only=True))
    probe.check()
    assert probe.nested_outcome is not None and not probe.nested_outcome.is_error
    assert probe.statuses["1.0"] == "completed"
    [requested] = [r.event for r in probe.stored
                   if getattr(r.event, "call_id", None) == "1.0/0" and r.seq and
                   type(r.event).__name__ == "ToolCallRequested"]
    assert requested.arguments == {"name": "caf\udce9"}
