"""Old public names and module paths kept working after a rename, each with a warning that
names the new one.

A module that renamed something public lists ``{old: new}`` and hands its own attribute
lookup to :func:`renamed_attribute`, so ``engine.core.policy.Verdict`` still gives the class now
called ``PolicyDecision`` and says so once per call site (docs/concepts.md, "Words")."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["moved_modules", "renamed_attribute", "warn_renamed"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is the deprecated name of ``new``."""
    warnings.warn(f"{old} is deprecated: use {new}", DeprecationWarning, stacklevel=stacklevel)


def renamed_attribute(module: str, renames: Mapping[str, str], namespace: Mapping[str, Any],
                      name: str) -> Any:
    """A module ``__getattr__``'s body: the renamed object under its old name, with a
    warning, or the usual :class:`AttributeError`."""
    new = renames.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warn_renamed(f"{module}.{name}", f"{module}.{new}", stacklevel=4)
    return namespace[new]


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a module under the path it had before it moved: the very module object at its new
    path (so patching either name patches both), with a warning naming the new path."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.moved:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = self.moved[spec.name]
        warnings.warn(f"module {spec.name} has moved: import {new}", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module ran when it was imported under its new path."""


_FINDER = _MovedModules()


def moved_modules(table: Mapping[str, str]) -> None:
    """Keep each old module path of ``table`` (``{old: new}``) importable, with a warning.

    ``import engine.session`` then gives :mod:`engine.runtime.session` itself. A package lists
    the modules it moved in its ``__init__`` (``MOVED_MODULES``) and calls this once."""
    _FINDER.moved.update(table)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
