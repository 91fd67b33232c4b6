"""The demo's project: a calculator with a bug, its test script, and where they are written.

``test_calc.py`` is a plain script (no test framework needed): it prints ``PASS name`` or
``FAIL name: why`` per test and exits 1 if any test failed.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEMO_FILES", "FIXED_CALC", "LOG_NAME", "TEST_SCRIPT", "inside", "prepare_workspace"]

LOG_NAME = "session.jsonl"
TEST_SCRIPT = "test_calc.py"

_BUGGY_CALC = '''\
"""A tiny calculator."""


def add(a, b):
    return a + b


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(values) / (len(values) - 1)
'''

FIXED_CALC = _BUGGY_CALC.replace("(len(values) - 1)", "len(values)")

_TEST_CALC = '''\
"""The tests of calc.py: a plain script. It prints PASS or FAIL per test and exits 1 if any
test failed."""

import sys

import calc


def test_add():
    assert calc.add(2, 3) == 5, calc.add(2, 3)


def test_mean():
    assert calc.mean([1, 2, 3]) == 2, calc.mean([1, 2, 3])


failed = 0
for name, test in list(globals().items()):
    if name.startswith("test_") and callable(test):
        try:
            test()
        except Exception as exc:
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        else:
            print(f"PASS {name}")
sys.exit(1 if failed else 0)
'''

#: The workspace as the demo writes it: file name to text.
DEMO_FILES: dict[str, str] = {"calc.py": _BUGGY_CALC, TEST_SCRIPT: _TEST_CALC}


def prepare_workspace(workdir: str | os.PathLike[str]) -> Path:
    """Write the demo project into ``workdir`` (created if needed) and remove its old log.

    Only the demo's own files are written or removed: pointing ``--workdir`` at a directory
    with other files in it leaves those alone.
    """
    path = Path(workdir)
    path.mkdir(parents=True, exist_ok=True)
    for name, content in DEMO_FILES.items():
        (path / name).write_text(content, encoding="utf-8")
    (path / LOG_NAME).unlink(missing_ok=True)
    return path.resolve()


def inside(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute) resolved; raises unless it is in the
    workspace, so that ``../`` and symlinks cannot reach out of it."""
    target = (workspace / path).resolve()
    if not target.is_relative_to(workspace):
        raise PermissionError(f"{path!r} is outside the workspace {workspace}")
    return target

