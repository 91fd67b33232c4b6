"""The docs say what the code does: every Python block of README.md and docs/*.md runs (the
convention is in tests/docexamples.py and docs/contributing.md), the README's example prints
what it says, and the lifecycle diagram and event catalogue in docs/events.md match the code."""

from __future__ import annotations

import json
import re
import traceback
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.lifecycle import diagram
from events.codec import EVENT_TYPES
from tests.docexamples import (
    ROOT,
    Block,
    DocExampleFailed,
    DocMarkupError,
    all_blocks,
    blocks,
    run_block,
    runnable,
)

BLOCKS = all_blocks()
# the docs whose example files tests/testing/test_testing_docs.py runs as a project
PROJECT_DOCS = {"docs/testing.md"}


@pytest.mark.parametrize("block", list(runnable(BLOCKS)), ids=lambda block: block.where)
def test_every_python_block_in_the_docs_runs(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if block.not_run is not None:
        pytest.skip(f"{block.where}: not run: {block.not_run}")
    run_block(block, tmp_path, monkeypatch)


def test_example_files_are_only_where_a_project_runs_them() -> None:
    docs = {block.where.split(":")[0] for block in BLOCKS if block.file is not None}
    assert docs <= PROJECT_DOCS


def test_readme_example_runs_and_writes_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_block(blocks(ROOT / "README.md")[0], tmp_path, monkeypatch)
    out = capsys.readouterr().out
    assert "tool_call: stat_file {'path': 'README.md'}" in out
    assert "completed {'size': 1234}" in out
    lines = (tmp_path / "session.jsonl").read_text().splitlines()
    types = [json.loads(line)["type"] for line in lines]
    assert types[0] == "session_started"
    assert "tool_call_completed" in types


def test_lifecycle_diagram_in_the_docs_is_the_table() -> None:
    text = (ROOT / "docs" / "events.md").read_text()
    block = re.search(r"```mermaid\n(.*?)\n```", text, re.S)
    assert block is not None
    assert block.group(1) == diagram()


def test_every_event_type_is_in_the_catalogue() -> None:
    text = (ROOT / "docs" / "events.md").read_text()
    missing = [name for name in EVENT_TYPES if f"| `{name}` |" not in text]
    assert missing == []


# -- the convention's own checks -----------------------------------------------------------


def run_dir(tmp_path: Path) -> Path:
    """A directory to run a block in, apart from the doc written for the test."""
    (tmp_path / "run").mkdir()
    return tmp_path / "run"


@pytest.mark.parametrize(("markdown", "complaint"), [
    ("<!-- example in: nowhere -->\n```python\npass\n```\n", ":1: no context named 'nowhere'"),
    ("<!-- example maybe -->\n```python\npass\n```\n", ":1: unknown example marker 'maybe'"),
    ("<!-- example in: session -->\n\n```python\npass\n```\n", ":1: an example marker must be "),
    ("<!-- example not run -->\n```python\npass\n```\n", ":1: 'example not run' needs a value"),
    ("<!-- example continues -->\n```python\npass\n```\n", ":1: 'example continues' needs a "),
    ("<!-- example calls: f {oops} -->\n```python\npass\n```\n", ":1: the arguments of 'example "),
    ("text\n\n```py\npass\n```\n", ":3: write ```python, so the block runs"),
    ("<!-- example in: session -->\n```sh\nls\n```\n", ":2: example markers belong to ```python"),
    (" <!-- example in: session -->\n```python\npass\n```\n", ":1: an example marker is one "),
    ("<!-- example in: session --> x\n```python\npass\n```\n", ":1: an example marker is one "),
])
def test_a_malformed_example_marker_is_refused_with_its_line(
    markdown: str, complaint: str, tmp_path: Path
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(markdown)
    with pytest.raises(DocMarkupError) as refused:
        blocks(doc)
    assert str(refused.value).startswith(f"{doc}{complaint}"), refused.value


def test_a_failing_block_names_its_doc_and_line_and_how_to_declare_a_fragment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# A doc\n\n```python\nx = 1\nprint(session)\n```\n")
    with pytest.raises(DocExampleFailed) as failed:
        run_block(blocks(doc)[0], run_dir(tmp_path), monkeypatch)
    message = str(failed.value)
    assert message.startswith(f"{doc}:3: the python block starting on this line raised "
                              "NameError: name 'session' is not defined")
    assert "<!-- example in: NAME -->" in message and "docs/contributing.md" in message
    # the traceback points at the doc's own line
    cause = failed.value.__cause__
    assert cause is not None and cause.__traceback__ is not None
    frames = traceback.extract_tb(cause.__traceback__)
    assert (frames[-1].filename, frames[-1].lineno) == (str(doc), 5)


def test_a_block_whose_tool_fails_when_called_fails_with_the_tools_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text('<!-- example calls: shout {"word": "hi"} -->\n```python\n'
                   "from engine import ToolResult, text, tool\n\n"
                   '@tool(input_schema={"type": "object"})\n'
                   "async def shout(call, ctx):\n"
                   '    return ToolResult(content=[text(call.arguments["word"].upper(1))])\n```\n')
    with pytest.raises(DocExampleFailed) as failed:
        run_block(blocks(doc)[0], run_dir(tmp_path), monkeypatch)
    assert str(failed.value).startswith(
        f'{doc}:2: the python block starting on this line defines a tool that did not complete: '
        'shout({"word": "hi"}) ended failed: ')
    assert f'File "{doc}", line 7, in shout' in str(failed.value)


def test_blocks_run_in_their_own_directory_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```python\nimport os, socket, tempfile\n"
                   "here, scratch = os.getcwd(), tempfile.mkdtemp()\n"
                   "try:\n    socket.create_connection(('192.0.2.1', 80), timeout=1)\n"
                   "except OSError as exc:\n    refused = str(exc)\n"
                   "try:\n    socket.getaddrinfo('example.com', 80)\n"
                   "except OSError as exc:\n    unresolved = str(exc)\n"
                   "with socket.create_server(('127.0.0.1', 0)) as server:\n"
                   "    with socket.create_connection(server.getsockname()) as client:\n"
                   "        loopback = client.getpeername() == server.getsockname()\n```\n")
    directory = run_dir(tmp_path)
    namespace = run_block(blocks(doc)[0], directory, monkeypatch)
    assert namespace["here"] == str(directory)
    assert Path(namespace["scratch"]).parent == directory
    assert namespace["refused"].startswith("the docs' examples run without network")
    assert namespace["unresolved"].startswith("the docs' examples run without network")
    assert namespace["loopback"]  # a block may serve on this machine and call itself


def test_a_continued_block_runs_after_the_one_above_in_its_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- example in: reviewer -->\n```python\ncount = 1\n```\n\nThen:\n\n"
                   "<!-- example continues -->\n```python\n"
                   "await notify_reviewer('1.0', 'rm', {}, 'why')\ncount += 1\n```\n")
    namespace = run_block(blocks(doc)[1], run_dir(tmp_path), monkeypatch)
    assert namespace["count"] == 2 and namespace["notified"] == [("1.0", "rm", {}, "why")]


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines() splits at each
MARKER_LINES = st.one_of(
    st.sampled_from([
        "<!-- example in: session -->", "<!-- example in: nowhere -->", "<!-- example in -->",
        "<!-- example continues -->", "<!-- example continues: x -->",
        "<!-- example not run: a shape -->", "<!-- example not run -->",
        "<!-- example calls: f {} -->", "<!-- example calls: f [1 -->",
        "<!-- example file: a.py -->", "<!-- example -->", "<!-- other comment -->",
        " <!-- example in: session -->", "<!-- example in: session --> and more",
    ]),
    st.text(st.characters(blacklist_characters=LINE_BREAKS), max_size=30).map(
        lambda body: f"<!-- example{body}-->"),
)
LINES = st.one_of(
    st.sampled_from(["", "Some prose.", "# A title", "    ```python", "```", "```python",
                     "```sh", "```py", "x = 1", "print(session)"]),
    MARKER_LINES,
)


@given(st.lists(LINES, max_size=24))
def test_any_markdown_parses_to_blocks_or_to_an_error_naming_its_line(lines: list[str]) -> None:
    doc = ROOT / "docs" / "generated.md"
    try:
        found = blocks(doc, "\n".join(lines))
    except DocMarkupError as refused:
        where = re.match(r"docs/generated\.md:(\d+): ", str(refused))
        assert where is not None and 1 <= int(where.group(1)) <= len(lines), refused
        return
    for block in found:
        assert lines[block.line - 1] == "```python"
        code = block.code.splitlines()
        assert lines[block.line:block.line + len(code)] == code
        assert lines[block.line + len(code)].startswith("```")
        assert all(not line.startswith("```") for line in code)
        if block.continues is not None:
            assert block.continues in found and block.continues.line < block.line
