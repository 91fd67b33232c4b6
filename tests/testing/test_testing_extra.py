"""The ``testing`` extra is enough to test one's own tools: docs/testing.md's example project
passes in a pytest subprocess where every distribution that only the project's own ``test``
extra brings (MCP, the provider SDKs, psycopg, OpenTelemetry, mypy, …) cannot be imported."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest

from tests.docexamples import ROOT
from tests.testing.test_testing_docs import examples
from tests.testing.test_testing_plugin import install_entry_point

pytest_plugins = ["pytester"]

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions these requirements bring, with what they require (the
    requirements an extra of theirs adds are left out; so is the project itself)."""
    seen: set[str] = set()
    todo = [r for r in requirements if not r.startswith(PROJECT["name"])]
    while todo:
        requirement = todo.pop()
        if "extra ==" in requirement.partition(";")[2]:
            continue
        name = _name(requirement)
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo.extend(requires)
    return seen


def only_for_the_projects_tests() -> set[str]:
    """Top-level modules of the distributions the ``test`` extra brings and neither the
    dependencies nor the ``testing`` extra do."""
    extras = PROJECT["optional-dependencies"]
    allowed = _closure(PROJECT["dependencies"] + extras["testing"])
    others = _closure(extras["test"]) - allowed
    modules: set[str] = set()
    for module, dists in metadata.packages_distributions().items():
        names = {re.sub(r"[-_.]+", "-", dist).lower() for dist in dists}
        if names & others and not names & allowed:
            modules.add(module)
    return modules


BLOCKER = '''
import sys

BLOCKED = {blocked!r}


class Blocker:
    """Refuses the modules only the project's own tests need."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the testing extra)")
        return None


sys.meta_path.insert(0, Blocker())
'''


def test_the_testing_extra_is_small_and_the_test_extra_holds_it() -> None:
    extras = PROJECT["optional-dependencies"]
    assert sorted(_name(r) for r in extras["testing"]) == ["hypothesis", "pytest", "pytest-trio"]
    assert f"{PROJECT['name']}[testing]" in extras["test"]


def test_a_users_tests_pass_with_only_the_testing_extra(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = only_for_the_projects_tests()
    assert {"mcp", "openai", "anthropic", "psycopg", "mypy", "opentelemetry"} <= blocked
    install_entry_point(pytester, monkeypatch)
    (pytester.path / "blocker.py").write_text(BLOCKER.format(blocked=sorted(blocked)))
    for name, source in examples().items():
        (pytester.path / name).write_text(source)
    # the blocker works: a test that imports what it refuses fails
    pytester.makepyfile(test_blocked="""
        import pytest

        def test_the_sdks_are_out_of_reach():
            with pytest.raises(ModuleNotFoundError, match="not in the testing extra"):
                import openai
    """)
    # the plugins a [testing] install has, and no others (this environment has more: anyio's)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins = ["blocker", "_hypothesis_pytestplugin", "pytest_trio.plugin",
               "engine.testing.plugin"]
    result = pytester.runpytest_subprocess(*(arg for plugin in plugins for arg in ("-p", plugin)),
                                           "-p", "no:cacheprovider", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["test_blocked.py::test_the_sdks_are_out_of_reach PASSED*"])
    result.stdout.fnmatch_lines(["test_notes_machine.py::TestNotes::runTest PASSED*"])
    assert outcomes["passed"] >= len(examples()) + 27
