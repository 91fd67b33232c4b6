"""The Temporal recipe (engine/hosts/temporal.py) under a real workflow on a Temporal server:
a workflow per session (workflow id = session id) runs the prompt as an activity, waits for a
person's signal when the prompt pauses, answers and resumes in a second activity.

Temporal's workflow server cannot run offline (its test server is downloaded when first
used), so this test runs only when ``TOOLLEDGER_TEMPORAL=host:port`` names a reachable server
(``temporal server start-dev`` listens on ``localhost:7233``), and says so when skipped.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio import workflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

with workflow.unsafe.imports_passed_through():
    from engine.hosts.temporal import (  # noqa: E402
        Answer,
        AnswerRequest,
        PromptOutcome,
        PromptRequest,
        SessionActivities,
    )

ADDRESS = os.environ.get("TOOLLEDGER_TEMPORAL", "")

pytestmark = pytest.mark.skipif(
    not ADDRESS, reason="no Temporal server: set TOOLLEDGER_TEMPORAL=host:port (e.g. "
                        "localhost:7233 from `temporal server start-dev`) to run the workflow "
                        "test; the activities are tested offline in test_temporal_recipe.py")

TIMEOUTS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(minutes=5),
    "heartbeat_timeout": timedelta(seconds=30),
    "retry_policy": RetryPolicy(maximum_attempts=5),
}


@workflow.defn(sandboxed=False)
class AgentWorkflow:
    """A session from its prompt to its end; a paused prompt waits for ``approve``."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []

    @workflow.signal
    def approve(self, answers: list[Answer]) -> None:
        self.answers.extend(answers)

    @workflow.run
    async def run(self, text: str) -> str:
        session_id = workflow.info().workflow_id
        outcome: PromptOutcome = await workflow.execute_activity(
            "run_prompt", PromptRequest(session_id=session_id, number=1, text=text),
            result_type=PromptOutcome, **TIMEOUTS)
        while outcome.stop == "paused":
            waiting = {p["call_id"] for p in outcome.pending}
            await workflow.wait_condition(
                lambda: any(a.call_id in waiting for a in self.answers))
            given, self.answers = self.answers, []
            outcome = await workflow.execute_activity(
                "answer_approvals", AnswerRequest(session_id=session_id, answers=given),
                result_type=PromptOutcome, **TIMEOUTS)
        return outcome.text


def test_a_workflow_pauses_for_a_signal_and_finishes(tmp_path: Path) -> None:
    """Runs in asyncio (Temporal's client is asyncio code), outside the trio test runner."""
    from engine import Annotations, ToolResult, text, tool
    from engine.models import ModelMessage, ModelRequest
    from events import SqliteStore
    from events.types import ModelToolCall

    ran: list[str] = []

    @tool(input_schema={"type": "object"}, annotations=Annotations(destructive=True))
    async def delete(call: Any, ctx: Any) -> ToolResult:
        """Needs approval."""
        ran.append(call.call_id)
        return ToolResult(content=[text("deleted")])

    class ByTurn:
        """Asks for ``delete`` in turn 1 and ends in turn 2, whichever activity asks."""

        async def complete(self, request: ModelRequest) -> ModelMessage:
            if request.turn == 1:
                return ModelMessage(text="", stop_reason="tool_use", tool_calls=(
                    ModelToolCall(id="c1", name="delete", arguments={"path": "a"}),))
            return ModelMessage(text="gone", tool_calls=(), stop_reason="stop")

    path = tmp_path / "sessions.sqlite"
    activities = SessionActivities(lambda: SqliteStore(path), lambda session_id: ByTurn(),
                                   [delete])

    async def main() -> str:
        client = await Client.connect(ADDRESS)
        queue = f"toolledger-{uuid.uuid4().hex}"
        async with Worker(client, task_queue=queue, workflows=[AgentWorkflow],
                          activities=[activities.run_prompt, activities.answer_approvals],
                          activity_executor=ThreadPoolExecutor(max_workers=4)):
            session_id = f"session-{uuid.uuid4().hex}"
            handle = await client.start_workflow(AgentWorkflow.run, "delete a",
                                                 id=session_id, task_queue=queue)
            # the answer is a durable signal: sent now, it waits for the pause
            await handle.signal(AgentWorkflow.approve, [Answer(call_id="1.0", granted=True)])
            return await handle.result()

    assert asyncio.run(main()) == "gone"
    assert ran == ["1.0"]
