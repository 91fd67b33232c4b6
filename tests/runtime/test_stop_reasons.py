"""A message cut off by the provider's token limit, whatever the provider calls it, fails its
calls without running them: their arguments may be truncated.

Providers name the same stop differently: OpenAI's Chat Completions says ``length``,
Anthropic's Messages ``max_tokens``, OpenAI's Responses an ``incomplete`` status. The engine
reads them all through one function (:func:`engine.models.truncated`) and records the stop
reason as the model gave it.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import events_of, run_session
from hypothesis import given
from hypothesis import strategies as st

from engine import Annotations, ToolResult, text, tool
from engine.models import TRUNCATED_STOP_REASONS, faux_message, faux_text, faux_tool_call, truncated
from events.types import AssistantMessage, ToolCallFailed, ToolExecutionStarted


def make_echo(runs: list[str]) -> Any:
    @tool(annotations=Annotations(read_only=True, open_world=False))
    async def echo(call: Any, ctx: Any) -> ToolResult:
        """Say it back."""
        runs.append(call.call_id)
        return ToolResult(content=[text("said")])

    return echo


@pytest.mark.parametrize("stop_reason", ["length", "max_tokens", "incomplete", "MAX_TOKENS",
                                         "model_context_window_exceeded"])
async def test_a_message_cut_off_under_any_providers_name_fails_its_calls_unrun(
    stop_reason: str,
) -> None:
    runs: list[str] = []
    cut = faux_message([faux_tool_call("echo", {"say": "a"}), faux_tool_call("echo", {})],
                       stop_reason=stop_reason)
    state, records, _ = await run_session([make_echo(runs)], [cut, faux_text("sorry")])
    assert runs == []
    assert events_of(records, ToolExecutionStarted) == []
    for call_id in ("1.0", "1.1"):
        terminal = state.calls[call_id].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "truncated"
        assert "arguments may be truncated" in terminal.result.text
        assert repr(stop_reason) in terminal.message  # the provider's own word
    message = events_of(records, AssistantMessage)[0]
    assert message.stop_reason == stop_reason  # recorded as the model gave it


@pytest.mark.parametrize("stop_reason", ["stop", "end_turn", "tool_use", "tool_calls",
                                         "completed", "stop_sequence"])
async def test_a_message_that_ended_normally_runs_its_calls(stop_reason: str) -> None:
    runs: list[str] = []
    message = faux_message([faux_tool_call("echo", {})], stop_reason=stop_reason)
    state, _, _ = await run_session([make_echo(runs)], [message, faux_text("ok")])
    assert runs == ["1.0"]
    assert state.calls["1.0"].status == "completed"


def test_truncated_reads_every_providers_name_for_the_token_limit() -> None:
    assert {"length", "max_tokens", "incomplete"} <= TRUNCATED_STOP_REASONS
    for reason in TRUNCATED_STOP_REASONS:
        assert truncated(reason) and truncated(reason.upper()) and truncated(f" {reason} ")
    for reason in ("stop", "end_turn", "tool_use", "tool_calls", "completed", ""):
        assert not truncated(reason)


@given(st.text(max_size=30))
def test_truncated_is_total_and_agrees_with_its_table(reason: str) -> None:
    assert truncated(reason) == (reason.strip().lower() in TRUNCATED_STOP_REASONS)
