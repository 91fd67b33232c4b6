"""Every module path that moved still imports: the same module object, with a warning that names
the new path (docs/architecture.md, "Old paths")."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import engine
import events

MOVED = {**engine.MOVED_MODULES, **events.MOVED_MODULES}


@pytest.mark.parametrize("old,new", sorted(MOVED.items()))
def test_an_old_path_gives_the_moved_module_and_warns(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} has moved: import {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_old_names_from_an_old_path_still_work() -> None:
    """``from engine.session import Session`` in a fresh interpreter, as old code has it."""
    code = ("import warnings; warnings.simplefilter('default')\n"
            "from engine.session import Session\n"
            "from engine.reducers import fold\n"
            "from events.models import ModelRequested\n"
            "import engine, events\n"
            "assert Session is engine.Session and fold is engine.fold\n"
            "assert ModelRequested is events.ModelRequested\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "engine.session has moved: import engine.runtime.session" in done.stderr


def test_a_path_that_never_existed_is_still_an_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("engine.no_such_module")


def test_the_halves_of_a_joined_class_name_the_whole() -> None:
    """``ProjectionState`` and ``SessionControls`` were the halves of ``Projection`` and
    ``Session``; under their old modules' paths they give the whole class, with a warning."""
    with pytest.warns(DeprecationWarning):
        sys.modules.pop("engine.core.projection", None)
        sys.modules.pop("engine.runtime.controls", None)
        projection = importlib.import_module("engine.core.projection")
        controls = importlib.import_module("engine.runtime.controls")
    with pytest.warns(DeprecationWarning, match="ProjectionState is deprecated: use"):
        assert projection.ProjectionState is engine.Projection
    with pytest.warns(DeprecationWarning, match="SessionControls is deprecated: use"):
        assert controls.SessionControls is engine.Session
