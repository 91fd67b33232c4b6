"""Our tool specs and results as the SDK's MCP types, and back.

What MCP carries survives the round trip; what it cannot carry (exposure, execution mode,
timeout, source) comes back from the arguments of the import; on the wire, the names are
MCP's."""

from __future__ import annotations

from typing import Any

import mcp_types
from hypothesis import given

from engine import Annotations, ToolResult
from engine.core.tools import ToolSpec
from engine.mcp import (
    annotations_from_mcp,
    annotations_to_mcp,
    result_from_mcp,
    result_to_mcp,
    tool_from_mcp,
    tool_to_mcp,
)
from engine.testing.strategies import tool_annotations, tool_specs
from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)


@given(tool_specs())
def test_a_spec_survives_mcp_with_what_mcp_cannot_carry_given_back(spec: ToolSpec) -> None:
    back = tool_from_mcp(tool_to_mcp(spec), spec.execute, exposure=spec.exposure,
                         execution_mode=spec.execution_mode, timeout=spec.timeout)
    assert back == spec


@given(tool_annotations())
def test_hints_survive_mcp_unset_ones_stay_unset(notes: Annotations) -> None:
    assert annotations_from_mcp(annotations_to_mcp(notes)) == notes


def test_the_wire_names_are_mcps() -> None:
    spec = ToolSpec(name="stat", description="Size of a file.",
                    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
                    output_schema={"type": "object", "properties": {"size": {"type": "integer"}}},
                    annotations=Annotations(title="Stat", read_only=True),
                    exposure="deferred", timeout=3.0, execute=_never)
    wire = tool_to_mcp(spec).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire == {
        "name": "stat", "title": "Stat", "description": "Size of a file.",
        "inputSchema": spec.input_schema, "outputSchema": spec.output_schema,
        "annotations": {"title": "Stat", "readOnlyHint": True},
    }


def test_an_imported_tool_takes_its_title_when_its_hints_have_none() -> None:
    tool = mcp_types.Tool(name="t", title="The T", input_schema={"type": "object"})
    spec = tool_from_mcp(tool, _never)
    assert spec.annotations == Annotations(title="The T")
    assert spec.description == ""
    assert (spec.exposure, spec.execution_mode, spec.timeout, spec.source) == (
        "direct", "parallel", None, None)


def test_results_and_every_kind_of_content_survive_mcp() -> None:
    result = ToolResult(
        content=[
            TextContent(text="hi"),
            ImageContent(data="aGk=", mime_type="image/png"),
            AudioContent(data="aGk=", mime_type="audio/wav"),
            ResourceLink(uri="file:///a.txt", name="a", title="A", description="the a",
                         mime_type="text/plain", size=2),
            EmbeddedResource(resource={"uri": "file:///b.txt", "mimeType": "text/plain",
                                       "text": "b"}),
            EmbeddedResource(resource={"uri": "file:///c.bin", "blob": "aGk="}),
        ],
        structured_content={"n": [1, 2.5, None, True]},
        is_error=True,
    )
    wire = result_to_mcp(result).model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire["isError"] is True and wire["structuredContent"] == {"n": [1, 2.5, None, True]}
    assert wire["content"][1] == {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    assert result_from_mcp(mcp_types.CallToolResult.model_validate(wire)) == result


async def _never(call: Any, ctx: Any) -> ToolResult:
    raise AssertionError("not run")


def test_the_core_imports_without_the_sdk_and_engine_mcp_names_the_extra() -> None:
    import subprocess
    import sys
    from pathlib import Path

    program = (
        "import sys\n"
        "sys.modules['mcp'] = sys.modules['mcp_types'] = None  # as if not installed\n"
        "import engine, engine.cli, events\n"
        "assert 'mcp' not in [name.split('.')[0] for name in sys.modules if sys.modules[name]]\n"
        "try:\n"
        "    import engine.mcp\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", program], cwd=root, capture_output=True,
                          text=True, env={"PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "toolledger[mcp]" in done.stdout
