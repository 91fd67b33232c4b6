"""docs/testing.md's example project runs as a user's project runs it: each block marked
``<!-- example file: NAME -->`` is written to NAME in a fresh directory, and pytest runs them
there in a subprocess, with the plugin installed through its entry point and trio mode on."""

from __future__ import annotations

import pytest

from tests.docexamples import ROOT, blocks
from tests.testing.test_testing_plugin import install_entry_point

pytest_plugins = ["pytester"]

DOC = ROOT / "docs" / "testing.md"


def examples() -> dict[str, str]:
    """The doc's example files by name (the markers are read as tests/docexamples.py reads
    them; its other blocks run in tests/project/test_docs.py)."""
    return {block.file: block.code for block in blocks(DOC) if block.file is not None}


def test_the_docs_have_the_examples_this_test_runs() -> None:
    files = examples()
    assert {"calc.py", "test_calc.py", "test_calc_arguments.py", "test_policy.py",
            "test_store.py", "notes.py", "test_notes_machine.py"} <= set(files)
    # the state machine example subclasses SessionMachine and runs as a test case
    assert "class NotesMachine(SessionMachine):" in files["test_notes_machine.py"]
    assert "TestNotes = NotesMachine.TestCase" in files["test_notes_machine.py"]


def test_the_docs_examples_pass_as_a_users_tests(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    install_entry_point(pytester, monkeypatch)
    files = examples()
    for name, source in files.items():
        (pytester.path / name).write_text(source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    tests = [name for name in files if name.startswith("test_")]
    # every example test file ran, and every test in it passed
    for name in tests:
        result.stdout.fnmatch_lines([f"{name}::* PASSED*"])
    result.stdout.fnmatch_lines(["test_notes_machine.py::TestNotes::runTest PASSED*"])
    result.stdout.fnmatch_lines(["test_calc.py::test_add_answers_the_model PASSED*"])
    assert outcomes["passed"] >= len(tests) + 27  # 27: the parametrized policy test
