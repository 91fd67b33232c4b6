"""pydantic-ai: ``add`` through ``ToolManager.handle_call``, and ``Agent.run`` with a
``FunctionModel``.

The tool manager is the one an agent run builds for each step (``for_run_step`` over a
``FunctionToolset``, with a ``RunContext``); ``handle_call`` validates the arguments against
the tool's schema (pydantic-core), runs the function, and counts retries. The agent loop is an
``Agent`` whose ``FunctionModel`` answers ``calls`` times with one ``ToolCallPart``, then with
text; the run's request limit (50 by default) is lifted. pydantic-ai keeps the message history
in memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from pydantic_ai import Agent, FunctionToolset, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.usage import RunUsage, UsageLimits

from .tool import ARGS, add

__all__ = ["agent_loop", "tool_path"]

US = 1e6


def tool_path(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await manager.handle_call(ToolCallPart("add", ARGS))``."""

    async def main() -> float:
        context = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        manager = await ToolManager(FunctionToolset([add])).for_run_step(context)
        call = ToolCallPart("add", ARGS, tool_call_id="call_0")
        handle = manager.handle_call
        if await handle(call) != 3:
            raise RuntimeError("pydantic-ai's add did not add")
        start = clock()
        for _ in range(calls):
            await handle(call)
        return clock() - start

    return asyncio.run(main()) / calls * US


def scripted(calls: int) -> FunctionModel:
    """``calls`` responses with one call of ``add``, then the text "done"."""
    turns = iter(range(calls + 1))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = next(turns)
        if turn == calls:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("add", dict(ARGS), tool_call_id=f"call_{turn}")])

    return FunctionModel(respond)


def agent_loop(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per turn of ``Agent.run`` over ``calls`` calls of ``add``."""
    agent: Agent[None, str] = Agent(scripted(calls), tools=[add])

    async def main() -> float:
        start = clock()
        result: Any = await agent.run("go", usage_limits=UsageLimits(request_limit=None))
        took = clock() - start
        if result.output != "done":
            raise RuntimeError(f"pydantic-ai's run ended with {result.output!r}")
        return took

    return asyncio.run(main()) / calls * US
