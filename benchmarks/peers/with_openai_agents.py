"""openai-agents: ``add`` through ``FunctionTool.on_invoke_tool``, and ``Runner.run`` with a
scripted model.

``function_tool(add)`` builds the tool the SDK's own way: a pydantic model of the signature
validates the arguments, parsed from the JSON string the model sent. The scripted model
implements the SDK's ``Model`` interface: ``calls`` responses with one function call, then a
message. Tracing is turned off (it would send spans to OpenAI's servers); nothing else is kept
but the run's items in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from agents import Agent, Runner, Usage, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.tool_context import ToolContext
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from .tool import ARGS_JSON, add

__all__ = ["agent_loop", "tool_path"]

US = 1e6
set_tracing_disabled(True)


class ScriptedModel(Model):
    """``calls`` responses with one call of ``add``, then the text "done"."""

    def __init__(self, calls: int) -> None:
        self._left = calls
        self._turn = 0

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self._turn += 1
        output: list[Any]
        if self._left <= 0:
            output = [ResponseOutputMessage(
                id=f"msg_{self._turn}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="done", annotations=[])])]
        else:
            self._left -= 1
            output = [ResponseFunctionToolCall(
                type="function_call", id=f"fc_{self._turn}", call_id=f"call_{self._turn}",
                name="add", arguments=ARGS_JSON, status="completed")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


def tool_path(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await tool.on_invoke_tool(context, arguments)``."""
    tool = function_tool(add)

    async def main() -> float:
        context = ToolContext(context=None, tool_name="add", tool_call_id="call_0",
                              tool_arguments=ARGS_JSON)
        invoke = tool.on_invoke_tool
        if await invoke(context, ARGS_JSON) != 3:
            raise RuntimeError("openai-agents' add did not add")
        start = clock()
        for _ in range(calls):
            await invoke(context, ARGS_JSON)
        return clock() - start

    return asyncio.run(main()) / calls * US


def agent_loop(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per turn of ``Runner.run`` over ``calls`` calls of ``add``."""
    agent = Agent(name="bench", instructions="Add.", tools=[function_tool(add)],
                  model=ScriptedModel(calls))

    async def main() -> float:
        start = clock()
        result = await Runner.run(agent, "go", max_turns=calls + 1)
        took = clock() - start
        if result.final_output != "done":
            raise RuntimeError(f"openai-agents' run ended with {result.final_output!r}")
        return took

    return asyncio.run(main()) / calls * US
