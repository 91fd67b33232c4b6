"""Tool names a provider cannot take never reach it: OpenAI and Anthropic take only
``[a-zA-Z0-9_-]{1,64}``, a tool's name may have dots and 128 characters (MCP's rule).
engine/models/toolnames.py gives each tool a name the provider takes and reads the reply's
names back."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.models.toolnames import ToolNames
from events.types import ModelToolCall

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
