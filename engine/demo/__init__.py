"""The demo: a real session over a tiny Python project, driven by a scripted or a real model.

``toolledger demo`` writes a workspace holding ``calc.py`` (with a bug) and ``test_calc.py``
(:mod:`engine.demo.workspace`), then runs a session whose tools do real work there
(:mod:`engine.demo.tools`): they start subprocesses, read and write files. Only the model
is scripted (:class:`~engine.models.FauxModel`), so the demo needs no network and no API
key; its last message is written from what the tools really returned. The log is
``session.jsonl`` in the workspace, the embedded default store; ``toolledger show`` reads it.

Given a model spec (``openai:MODEL``, ``anthropic:MODEL``: :mod:`engine.models.connect`), the
same tools run against that model instead, told what to do by :data:`SYSTEM_PROMPT`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from events.stores import JsonlStore
from events.types import Record, ToolProgress

from ..core.approvals import Approver
from ..core.reducers import Projection, ToolResultEntry
from ..models import (
    FauxModel,
    FauxStep,
    Model,
    ModelMessage,
    ModelRequest,
    faux_text,
    faux_tool_call,
)
from ..models.connect import open_model
from ..runtime.session import PromptResult, Session
from .tools import demo_tools
from .workspace import DEMO_FILES, FIXED_CALC, LOG_NAME, TEST_SCRIPT, prepare_workspace

__all__ = [
    "DEMO_FILES",
    "DemoRun",
    "FIXED_CALC",
    "LOG_NAME",
    "PROMPT",
    "ProgressWatcher",
    "SYSTEM_PROMPT",
    "demo_script",
    "demo_tools",
    "prepare_workspace",
    "run_demo",
]

PROMPT = "The tests of this project fail. Find the bug in calc.py and fix it."
SYSTEM_PROMPT = (
    "You work in a small Python project through the tools you are given. Read the code and "
    "run its tests before you change anything; make the smallest fix; review your change "
    "with review_diff before you say you are done."
)


def _final_answer(request: ModelRequest) -> ModelMessage:
    """The scripted model's last message, written from what the tools actually returned."""
    results = {e.name: e.result for e in request.transcript if isinstance(e, ToolResultEntry)}
    wrote, review = results.get("write_file"), results.get("review_diff")
    report = review.structured_content if review is not None else None
    if wrote is None or wrote.is_error:
        why = wrote.text if wrote is not None else "it was never written"
        message = (f"I could not apply the fix ({why}). The bug: mean() divides by "
                   f"len(values) - 1 instead of len(values).")
    elif isinstance(report, dict) and report.get("ready"):
        message = ("Fixed: mean() now divides by len(values). Every file compiles and "
                   "every test passes.")
    else:
        message = "I wrote the fix, but the review still reports problems: see review_diff."
    return ModelMessage(text=message)


def demo_script() -> list[FauxStep]:
    """What the scripted model says, turn by turn."""
    return [
        [faux_text("Let me read calc.py first."),
         faux_tool_call("read_file", {"path": "calc.py"})],
        [faux_text("Now the tests, to see what fails."),
         faux_tool_call("run_command", {"argv": ["python", TEST_SCRIPT]})],
        [faux_text("mean() divides by len(values) - 1; it must divide by len(values). "
                   "Writing the fix."),
         faux_tool_call("write_file", {"path": "calc.py", "text": FIXED_CALC})],
        [faux_text("Let me review the change."), faux_tool_call("review_diff")],
        _final_answer,
    ]


#: What hears the demo's progress: each update, and the name of the tool that reported it.
ProgressWatcher = Callable[[ToolProgress, str], Any]


@attrs.frozen(kw_only=True)
class DemoRun:
    """What a demo run left: where, which session, its final state and its records."""

    workspace: Path
    log_path: Path
    session_id: str
    projection: Projection
    result: PromptResult
    records: Sequence[Record] = ()


async def run_demo(workdir: str | os.PathLike[str], approver: Approver, *,
                   model: str | None = None, base_url: str | None = None,
                   on_progress: ProgressWatcher | None = None) -> DemoRun:
    """Write the workspace, run the session on its JSONL log, and return the result: with the
    scripted model, or with the real one ``model`` names (``openai:MODEL``, ...), whose
    client ``base_url`` may point at another server. ``on_progress`` is called with each
    progress update as it is recorded (the tools stream their commands' output) and the name
    of the tool whose call reported it, as the session's progress handler is
    (``session.on_progress``)."""
    if model is None:
        faux = FauxModel(demo_script())
        run = await _run(workdir, approver, faux, None, on_progress)
        faux.assert_complete()
        return run
    async with open_model(model, base_url=base_url) as real:
        return await _run(workdir, approver, real, SYSTEM_PROMPT, on_progress)


async def _run(workdir: str | os.PathLike[str], approver: Approver, model: Model,
               system_prompt: str | None, on_progress: ProgressWatcher | None) -> DemoRun:
    workspace = prepare_workspace(workdir)
    log_path = workspace / LOG_NAME
    with JsonlStore(log_path) as store:
        async with Session.open(
            store, model=model, tools=demo_tools(workspace), approver=approver,
            metadata={"demo": "calc", "workspace": str(workspace)},
            system_prompt=system_prompt,
        ) as session:
            if on_progress is not None:
                watcher = on_progress
                session.on_progress(
                    lambda update: watcher(update, session.calls[update.call_id].name))
            result = await session.prompt(PROMPT)
        return DemoRun(workspace=workspace, log_path=log_path, session_id=session.session_id,
                       projection=session.state, result=result, records=session.records)
