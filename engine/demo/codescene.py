"""The demo's code-mode scene: the same project and tools, but the model writes one program
that reads the code, runs the tests, writes the fix (which waits for approval) and reviews it.

Every tool is registered as a ``codemode`` tool beside the code tool, so the model is told
``run_code`` alone, with the tools as Python stubs; each call the program makes is a nested
call of the ``run_code`` call, through the same approval as when the model calls
``write_file`` itself. ``toolledger demo --code`` runs it.
"""

from __future__ import annotations

import os

import attrs

from events.stores import JsonlStore

from ..codemode import CODE_TOOL, code_tool
from ..core.approvals import Approver
from ..core.reducers import ToolResultEntry
from ..models import FauxModel, FauxStep, ModelMessage, ModelRequest, faux_text, faux_tool_call
from ..runtime.session import Session
from . import DemoRun, ProgressWatcher
from .tools import demo_tools
from .workspace import FIXED_CALC, LOG_NAME, prepare_workspace

__all__ = ["CODE_PROGRAM", "code_demo_script", "run_code_demo"]

#: The program the scripted model writes: it reads and tests at once, writes the fix (the
#: approver is asked, as for a direct call), and reviews the change.
CODE_PROGRAM = """\
import asyncio


async def tests():
    try:
        return await failing_tests_async()
    except RuntimeError as failing:  # failing tests are an error result
        return str(failing)


source, before = await asyncio.gather(read_file_async(path="calc.py"), tests())
print("before:", before.splitlines()[0])
if "len(values) - 1" in source["text"]:
    try:
        print("wrote", write_file(path="calc.py", text=FIXED)["bytes"], "bytes")
    except PermissionError as refused:
        print("not written:", refused)
review = review_diff()
print("after:", review["tests"]["text"].splitlines()[0])
review["ready"]
""".replace("FIXED", repr(FIXED_CALC))


def _final_answer(request: ModelRequest) -> ModelMessage:
    """The scripted model's answer, from what the program returned."""
    results = [e.result for e in request.transcript if isinstance(e, ToolResultEntry)]
    ran = results[-1] if results else None
    report = ran.structured_content if ran is not None else None
    if isinstance(report, dict) and report.get("result") is True:
        return ModelMessage(text="Fixed: mean() now divides by len(values), and every test "
                                 "passes.")
    return ModelMessage(text="The fix was not applied: see what the program printed.")


def code_demo_script() -> list[FauxStep]:
    """What the scripted model says: one program, then its answer."""
    return [[faux_text("I will do it in one program."),
             faux_tool_call(CODE_TOOL, {"code": CODE_PROGRAM})],
            _final_answer]


async def run_code_demo(workdir: str | os.PathLike[str], approver: Approver,
                        on_progress: ProgressWatcher | None = None) -> DemoRun:
    """Write the workspace, run the scene on its JSONL log, and return the result;
    ``on_progress`` hears each progress update as it comes, with its tool's name."""
    workspace = prepare_workspace(workdir)
    tools = [attrs.evolve(spec, exposure="codemode") for spec in demo_tools(workspace)]
    model = FauxModel(code_demo_script())
    log_path = workspace / LOG_NAME
    with JsonlStore(log_path) as store:
        async with Session.open(
            store, model=model, tools=[*tools, code_tool()], approver=approver,
            metadata={"demo": "calc-code", "workspace": str(workspace)},
        ) as session:
            await session.activate([spec.name for spec in tools])
            if on_progress is not None:
                watcher = on_progress
                session.on_progress(
                    lambda update: watcher(update, session.calls[update.call_id].name))
            result = await session.prompt(
                "The tests of this project fail. Fix calc.py, in one program.")
    model.assert_complete()
    return DemoRun(workspace=workspace, log_path=log_path, session_id=session.session_id,
                   projection=session.state, result=result, records=session.records)
