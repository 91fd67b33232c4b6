"""The pytest plugin: installed through the ``pytest11`` entry point that pyproject.toml
declares, it gives a user's test file the ``faux_model``, ``memory_store`` and
``session_factory`` fixtures without a conftest.py; and it imports nothing from Hypothesis.

The sub-sessions run in a subprocess with the entry point installed the way ``pip install``
installs it: a ``dist-info`` directory on the path whose ``entry_points.txt`` is read from our
pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def install_entry_point(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make pyproject.toml's pytest11 entry points visible to a pytest subprocess, and the
    project importable, as an installed distribution would be; turn on trio mode."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    plugins = project["entry-points"]["pytest11"]
    site = pytester.path / "site"
    dist = site / f"{project['name']}-{project['version']}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (dist / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{name} = {value}\n" for name, value in plugins.items()))
    monkeypatch.setenv("PYTHONPATH", f"{site}:{ROOT}")
    pytester.makeini("[pytest]\ntrio_mode = true\n")


def test_pyproject_declares_the_plugin_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"toolledger": "engine.testing.plugin"}


def test_a_users_test_file_gets_the_fixtures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_entry_point(pytester, monkeypatch)
    pytester.makepyfile(test_user="""
        from engine import Annotations, ToolResult, approve_all, fold, text, tool
        from engine.models import FauxModel, faux_text, faux_tool_call
        from events import MemoryStore

        @tool(annotations=Annotations(destructive=True))
        async def wipe(call, ctx):
            return ToolResult(content=[text("wiped")])

        def test_faux_model_makes_models_and_checks_them(faux_model):
            model = faux_model([faux_text("hi")])
            assert isinstance(model, FauxModel) and faux_model.made == [model]
            try:
                faux_model.assert_complete()
            except AssertionError:
                pass
            else:
                raise AssertionError("a model with unused steps passed assert_complete")

        def test_memory_store_is_fresh(memory_store):
            assert isinstance(memory_store, MemoryStore)

        async def test_session_factory_is_deterministic(session_factory, faux_model, memory_store):
            logs = []
            for _ in range(2):
                model = faux_model([faux_tool_call("wipe"), faux_text("done")])
                async with session_factory(tools=[wipe], model=model,
                                           approver=approve_all) as session:
                    await session.prompt("go")
                    logs.append(await memory_store.read(session.session_id))
                    assert fold(logs[-1]).snapshot() == session.state.snapshot()
            assert [r.session_id for r in logs[0]][:1] == ["session-1"]
            assert [r.session_id for r in logs[1]][:1] == ["session-2"]
            times = [[r.time for r in log] for log in logs]
            assert times[0] == sorted(times[0]) and len(set(times[0])) == len(times[0])
            assert [type(r.event) for r in logs[0]] == [type(r.event) for r in logs[1]]
            faux_model.assert_complete()

        async def test_session_factory_takes_another_store(session_factory):
            other = MemoryStore()
            async with session_factory(store=other) as session:
                await session.prompt("hello")
            assert await other.sessions() == [session.session_id]
            assert await session_factory.store.sessions() == []
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_the_fixtures_come_from_the_plugin_named_toolledger(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the other side of the test above: with that plugin blocked, the fixtures are missing
    install_entry_point(pytester, monkeypatch)
    pytester.makepyfile(test_user="""
        def test_needs_the_plugin(memory_store):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:toolledger")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'memory_store' not found*"])


def test_the_plugin_and_the_invariants_import_without_hypothesis(tmp_path: Path) -> None:
    # a project that has toolledger but not Hypothesis loads the plugin on every pytest run
    blocker = tmp_path / "hypothesis.py"
    blocker.write_text("raise ImportError('hypothesis is not installed here')\n")
    code = (
        "import engine.testing.plugin, engine.testing, sys\n"
        "from engine.testing import check_log, BodyRuns, counted, catalogue_tools\n"
        "assert 'hypothesis' not in sys.modules or sys.modules['hypothesis'] is None\n"
        "try:\n"
        "    engine.testing.SessionMachine\n"
        "except ImportError as exc:\n"
        "    print('lazy:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "lazy: hypothesis is not installed here" in done.stdout
