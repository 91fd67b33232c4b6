"""Production code does not lean on trio's testing aids: ``trio.testing`` is for tests and the
testing kit (``engine/testing/``), not for deciding what a session does."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "engine" / "testing"
#: replay runs recorded tools in virtual time (MockClock); it waits for no task: the command
#: and the web console's page build that clock in one place
ALLOWED = {ROOT / "engine" / "replay" / "clock.py"}


def uses_trio_testing(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                a.name == "trio.testing" or a.name.startswith("trio.testing.")
                for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and (
                node.module.startswith("trio.testing")
                or (node.module == "trio" and any(a.name == "testing" for a in node.names))):
            lines.append(node.lineno)
        elif (isinstance(node, ast.Attribute) and node.attr == "testing"
              and isinstance(node.value, ast.Name) and node.value.id == "trio"):
            lines.append(node.lineno)
    return lines


def test_trio_testing_is_not_used_by_production_code() -> None:
    found = []
    for package in ("engine", "events"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if KIT in path.parents or path in ALLOWED:
                continue
            for line in uses_trio_testing(ast.parse(path.read_text(), str(path))):
                found.append(f"{path.relative_to(ROOT)}:{line}")
    assert found == []


def test_the_check_finds_each_way_of_reaching_trio_testing() -> None:
    for source in ("import trio.testing", "from trio.testing import MockClock",
                   "from trio import testing", "import trio\nawait_it = trio.testing.x"):
        assert uses_trio_testing(ast.parse(source)), source
    assert not uses_trio_testing(ast.parse("import trio\ntrio.lowlevel.checkpoint"))
