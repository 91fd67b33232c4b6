"""The demo's tools: real work in the workspace (subprocesses, file reads and writes).

``read_file``, ``run_checks``, ``failing_tests`` and ``review_diff`` declare themselves
read-only and run without asking. ``write_file`` declares ``destructive=True`` and
``run_command`` declares nothing about destruction (a command runner is dangerous by
default), so the policy asks before either runs. ``review_diff`` runs ``run_checks`` and
``failing_tests`` as nested calls, and forwards their progress as its own. Each tool that
starts a subprocess streams its output as progress while it runs
(:func:`~engine.demo.process.run_streamed`); the model reads only the result.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

import trio

from events.results import ToolResult, text
from events.types import Annotations

from ..core.toolcontext import ToolContext
from ..core.tools import ToolCall, ToolSpec, tool
from .process import decoded, run_streamed
from .workspace import DEMO_FILES, TEST_SCRIPT, inside

__all__ = ["demo_tools"]

# Compiles each file named on the command line without writing bytecode (py_compile would).
_CHECK_SCRIPT = """\
import sys
bad = 0
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as file:
            compile(file.read(), path, "exec")
    except (SyntaxError, ValueError) as exc:
        bad += 1
        print(f"{path}: {type(exc).__name__}: {exc}")
    else:
        print(f"{path}: ok")
sys.exit(1 if bad else 0)
"""

_STRING = {"type": "string"}
_PATH_INPUT = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "relative to the workspace"}},
    "required": ["path"],
    "additionalProperties": False,
}
_COMMAND_OUTPUT = {
    "type": "object",
    "properties": {"exit_code": {"type": "integer"}, "stdout": _STRING, "stderr": _STRING},
    "required": ["exit_code", "stdout", "stderr"],
}
_TESTS_OUTPUT = {
    "type": "object",
    "properties": {
        "failing": {"type": "array", "items": _STRING},
        "passed": {"type": "integer"},
    },
    "required": ["failing", "passed"],
}
_CHECKS_OUTPUT = {
    "type": "object",
    "properties": {
        "checked": {"type": "array", "items": _STRING},
        "problems": {"type": "array", "items": _STRING},
    },
    "required": ["checked", "problems"],
}


def demo_tools(workspace: Path) -> list[ToolSpec]:
    """The demo's tools, each working inside ``workspace`` (an absolute, resolved path)."""

    @tool(
        input_schema={
            "type": "object",
            "properties": {"argv": {"type": "array", "items": _STRING, "minItems": 1}},
            "required": ["argv"],
            "additionalProperties": False,
        },
        output_schema=_COMMAND_OUTPUT,
        annotations=Annotations(title="Run a command", open_world=False),
        timeout=120,
    )
    async def run_command(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run a command (an argv list, no shell) in the workspace. A non-zero exit is
        reported with the output, not as an error. The output streams as progress while the
        command runs."""
        done = await run_streamed(list(call.arguments["argv"]), workspace, ctx)
        stdout, stderr = decoded(done.stdout), decoded(done.stderr)
        parts = [f"exit code {done.returncode}"]
        if stdout:
            parts.append(f"stdout:\n{stdout.rstrip()}")
        if stderr:
            parts.append(f"stderr:\n{stderr.rstrip()}")
        return ToolResult(
            content=[text("\n".join(parts))],
            structured_content={"exit_code": done.returncode, "stdout": stdout, "stderr": stderr},
        )

    @tool(
        input_schema=_PATH_INPUT,
        output_schema={
            "type": "object",
            "properties": {"path": _STRING, "text": _STRING},
            "required": ["path", "text"],
        },
        annotations=Annotations(title="Read a file", read_only=True, open_world=False),
    )
    async def read_file(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Read a UTF-8 text file of the workspace."""
        path = call.arguments["path"]
        content = await trio.Path(inside(workspace, path)).read_text(encoding="utf-8")
        return ToolResult(
            content=[text(content)], structured_content={"path": path, "text": content}
        )

    @tool(
        input_schema={
            "type": "object",
            "properties": {"path": _STRING, "text": _STRING},
            "required": ["path", "text"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"path": _STRING, "bytes": {"type": "integer"}},
            "required": ["path", "bytes"],
        },
        annotations=Annotations(title="Write a file", destructive=True, open_world=False),
    )
    async def write_file(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Replace a file of the workspace with the given UTF-8 text."""
        path, content = call.arguments["path"], call.arguments["text"]
        data = content.encode("utf-8")
        await trio.Path(inside(workspace, path)).write_bytes(data)
        return ToolResult(
            content=[text(f"wrote {len(data)} bytes to {path}")],
            structured_content={"path": path, "bytes": len(data)},
        )

    @tool(
        output_schema=_CHECKS_OUTPUT,
        annotations=Annotations(
            title="Compile every Python file", read_only=True, open_world=False
        ),
    )
    async def run_checks(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Compile every .py file of the workspace (in a subprocess) and report syntax errors."""
        files = sorted(p.name for p in workspace.glob("*.py"))
        done = await run_streamed([sys.executable, "-c", _CHECK_SCRIPT, *files], workspace, ctx)
        lines = decoded(done.stdout).splitlines()
        problems = [line for line in lines if not line.endswith(": ok")]
        if done.returncode != 0 and not problems:
            why = decoded(done.stderr).strip()
            raise RuntimeError(f"the checker exited {done.returncode}: {why}")
        summary = f"{len(files)} files compiled, {len(problems)} with errors"
        return ToolResult(
            content=[text("\n".join([summary, *problems]))],
            structured_content={"checked": files, "problems": problems},
            is_error=bool(problems),
        )

    @tool(
        output_schema=_TESTS_OUTPUT,
        annotations=Annotations(title="Run the tests", read_only=True, open_world=False),
    )
    async def failing_tests(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Run the project's test script and name the tests that fail."""
        done = await run_streamed([sys.executable, TEST_SCRIPT], workspace, ctx)
        lines = decoded(done.stdout).splitlines()
        failing = [line.split()[1].rstrip(":") for line in lines if line.startswith("FAIL ")]
        passed = sum(1 for line in lines if line.startswith("PASS "))
        if done.returncode != 0 and not failing:
            # The script died before it could say which test failed: no data to return.
            last = (decoded(done.stderr).strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{TEST_SCRIPT} exited {done.returncode} without a report: {last}")
        report = [line for line in lines if line.startswith("FAIL ")]
        summary = f"{passed} passed, {len(failing)} failed"
        return ToolResult(
            content=[text("\n".join([summary, *report]))],
            structured_content={"failing": failing, "passed": passed},
            is_error=bool(failing),
        )

    @tool(
        output_schema={
            "type": "object",
            "properties": {
                "ready": {"type": "boolean"},
                "diff": _STRING,
                "checks": {"type": "object"},
                "tests": {"type": "object"},
            },
            "required": ["ready", "diff", "checks", "tests"],
        },
        annotations=Annotations(title="Review the change", read_only=True, open_world=False),
    )
    async def review_diff(call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Show how the workspace differs from the original project, run the checks and the
        tests (as nested calls, whose output streams on as this call's progress), and say
        whether the change is ready."""
        diff = await _diff(workspace)
        checks = await ctx.execute_tool("run_checks", {}, on_progress=ctx.forward_progress)
        tests = await ctx.execute_tool("failing_tests", {}, on_progress=ctx.forward_progress)
        ready = bool(diff) and not checks.is_error and not tests.is_error
        status = "ready" if ready else ("no change yet" if not diff else "not ready")
        lines = [
            f"review: {status}",
            f"checks ({checks.call_id}): {_first_line(checks.result)}",
            f"tests ({tests.call_id}): {_first_line(tests.result)}",
            diff.rstrip() if diff else "(no changes)",
        ]
        return ToolResult(
            content=[text("\n".join(lines))],
            structured_content={
                "ready": ready,
                "diff": diff,
                "checks": _outcome(checks.call_id, checks.result),
                "tests": _outcome(tests.call_id, tests.result),
            },
        )

    return [read_file, run_command, write_file, review_diff, run_checks, failing_tests]


async def _diff(workspace: Path) -> str:
    chunks: list[str] = []
    for name, original in DEMO_FILES.items():
        path = trio.Path(workspace / name)
        current = await path.read_text(encoding="utf-8") if await path.exists() else ""
        chunks.extend(difflib.unified_diff(
            original.splitlines(keepends=True), current.splitlines(keepends=True),
            fromfile=f"a/{name}", tofile=f"b/{name}",
        ))
    return "".join(chunks)


def _first_line(result: ToolResult) -> str:
    return (result.text.strip().splitlines() or ["(empty)"])[0]


def _outcome(call_id: str, result: ToolResult) -> dict[str, Any]:
    return {"call_id": call_id, "is_error": result.is_error, "result": result.structured_content,
            "text": result.text}

