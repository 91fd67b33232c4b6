"""Tool names a provider cannot take never reach it: OpenAI and Anthropic take only
``[a-zA-Z0-9_-]{1,64}``, a tool's name may have dots and 128 characters (MCP's rule). The
adapters give each tool a name the provider takes, read the reply's names back, and the log
keeps both (engine/models/toolnames.py)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from engine import Annotations, Session, ToolResult, approve_all, fold, text, tool
from engine.models.toolnames import ToolNames
from engine.present.render import render_transcript
from engine.replay import redrive
from engine.testing import check_session
from events import MemoryStore
from events.types import AssistantMessage, ModelToolCall, ToolCallCompleted, ToolCallRequested
from tests.models.apis import APIS, Api
from tests.models.edits import body, load, replaced
from tests.models.server import payload
from tests.models.test_adapters import of

PROVIDER = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MCP_NAMES = st.from_regex(r"[A-Za-z0-9_.-]{1,128}", fullmatch=True)

# -- the rule ---------------------------------------------------------------------------------


@given(st.lists(MCP_NAMES | st.text(max_size=200), max_size=8), st.randoms())
def test_every_name_gets_its_own_provider_name_whatever_the_order(names: list[str],
                                                                  order: Any) -> None:
    given_names = ToolNames(names)
    sent = {name: given_names.sent(name) for name in names}
    assert all(PROVIDER.fullmatch(name) for name in sent.values())
    assert len(set(sent.values())) == len(sent)  # no two tools share one
    for name, provider_name in sent.items():
        assert provider_name == name or not PROVIDER.fullmatch(name)  # taken names stay
        assert given_names.read(provider_name)[0] == name
    shuffled = list(names)
    order.shuffle(shuffled)
    again = ToolNames(shuffled)
    assert {name: again.sent(name) for name in names} == sent


def test_a_dotted_name_never_takes_a_real_tools_name() -> None:
    names = ToolNames(["notes.read", "notes_read", "notes-read", "notes.read.", "notes_read_2"])
    assert names.sent("notes_read") == "notes_read" and names.sent("notes_read_2") == "notes_read_2"
    assert names.sent("notes.read") == "notes_read_3" and names.sent("notes.read.") == "notes_read_"
    assert names.read("notes_read") == ("notes_read", None)
    assert names.read("notes_read_3") == ("notes.read", "notes_read_3")
    assert names.call("c", "notes_read", {}) == ModelToolCall(id="c", name="notes_read",
                                                              arguments={})
    long = "fs." + "a" * 125
    assert ToolNames([long]).sent(long) == "fs_" + "a" * 61


# -- through each API -------------------------------------------------------------------------

DOTTED, REAL, LONG = "notes.read", "notes_read", "files." + "a" * 90


def says_its_name(name: str) -> Any:
    @tool(name=name, description="Says which tool ran",
          input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
          annotations=Annotations(read_only=True, open_world=False))
    async def said(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text(f"{name} ran")])

    return said


#: Where each API's two calls are in ``parallel_calls.json``, and their name's field.
CALLS = {"chat": (("choices", 0, "message", "tool_calls"), ("function", "name")),
         "responses": (("output",), ("name",)),
         "anthropic": (("content",), ("name",))}


def names_in(value: Any) -> list[str]:
    """Every tool name a request body carries (declared, or in a call sent back)."""
    if isinstance(value, list):
        return [name for item in value for name in names_in(item)]
    if not isinstance(value, dict):
        return []
    found = [value["name"]] if isinstance(value.get("name"), str) else []
    return found + [name for key, item in value.items() if key != "input_schema"
                    for name in names_in(item)]


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_the_provider_sees_names_it_takes_and_the_log_keeps_both(api: Api) -> None:
    reply = load(api.name, "parallel_calls")
    at, name = CALLS[api.name]
    # the model calls the dotted tool by the name it was given, and the real one by its own
    reply = replaced(reply, (*at, 0, *name), "notes_read_2")
    reply = replaced(reply, (*at, 1, *name), "notes_read")
    store = MemoryStore()
    tools = [says_its_name(n) for n in (DOTTED, REAL, LONG)]
    async with api.answering([body(reply), payload(api.name, "final_text")]) as (model, sent):
        async with Session.open(store, model=model, tools=tools, approver=approve_all,
                                session_id="s", create=True) as session:
            assert (await session.prompt("read the notes")).text == "done"
            await check_session(session, store, closed=True)
    first, second = sent
    assert {name for name in names_in(first)} == {"notes_read", "notes_read_2",
                                                  "files_" + "a" * 58}
    assert all(PROVIDER.fullmatch(n) for n in names_in(first) + names_in(second))
    records = await store.read("s")
    assert [r.name for r in of(records, ToolCallRequested)] == [DOTTED, REAL]
    assert {c.call_id: c.result.text for c in of(records, ToolCallCompleted)} == {
        "1.0": f"{DOTTED} ran", "1.1": f"{REAL} ran"}
    [message, _] = of(records, AssistantMessage)
    assert [(c.name, c.model_name) for c in message.tool_calls] == [
        (DOTTED, "notes_read_2"), (REAL, None)]
    report = await redrive(records)
    assert report.ok, report.divergences
    assert of(report.replayed, AssistantMessage) == of(records, AssistantMessage)
    shown = io.StringIO()
    Console(file=shown, width=200).print(render_transcript(fold(records)))
    assert "notes.read" in shown.getvalue() and "notes_read_2" in shown.getvalue()

