"""Old public names kept working after a rename, each with a warning that names the new one.

A module that renamed something public lists ``{old: new}`` and hands its own attribute
lookup to :func:`renamed_attribute`, so ``engine.policy.Verdict`` still gives the class now
called ``PolicyDecision`` and says so once per call site (docs/concepts.md, "Words")."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["renamed_attribute", "warn_renamed"]


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
