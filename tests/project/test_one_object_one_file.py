"""One object, one file: a class is read in one module, not assembled from halves in others.

Two rules, each with the list of what is known to break it and why:

- the asyncio :class:`engine.hosts.aio.Session` mirrors the trio :class:`engine.Session` method
  for method, by hand: a public method or property added to one and not the other fails here;
- no class in ``engine`` or ``events`` inherits from a class of another of the project's
  modules, unless that base is a Protocol, an abstract base, an exception, or a base declared
  here as made to be built on.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from types import ModuleType

import engine
import events
from engine.hosts import aio
from engine.runtime import session as trio_session

#: Public names one Session has and the other does not, on purpose: the asyncio session is the
#: trio one, awaited from asyncio. A difference added here says why.
ONLY_TRIO: dict[str, str] = {
    "run_sync": "sync code's way in, a trio run of its own; asyncio code awaits the session",
}
ONLY_AIO: dict[str, str] = {
    "in_trio": "holds a trio context manager built on the session (a mount) open for an "
               "asyncio block; trio code enters it directly",
}

#: Bases made to be built on by other modules (name: why).
DECLARED_BASES = {
    "events.stores.base.ClosingStore": "a store's `with` block, for every backend "
                                       "(docs/stores.md)",
    "events.stores.base.InlineStore": "the stores whose I/O runs inline in the caller's task "
                                      "(docs/stores.md)",
    "events.stores.verifyapart.ChecksApart": "a store's check in a child process, for every "
                                             "backend a child can open again (docs/stores.md)",
}

#: Classes still assembled from a base in another module (subclass: (base, why not yet)).
NOT_YET_JOINED = {
    "engine.testing.machine.SessionMachine": (
        "engine.testing.machinebase.SessionMachineBase",
        "the rules (what a host may do) are kept apart from the machinery so the rule file "
        "reads as that list; joining them needs the machinery split out as an object the "
        "machine holds, which Hypothesis's RuleBasedStateMachine makes delicate"),
    "events.stores.jsonl.JsonlStore": (
        "events.stores.jsonlindex.JsonlIndex",
        "the store is its index plus appends; the index should become an object the store "
        "holds, a change to the store's hottest path that wants its own measurement"),
}

PROJECT = ("engine", "events")


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_the_asyncio_session_mirrors_the_trio_session() -> None:
    trio_names, aio_names = _public(trio_session.Session), _public(aio.Session)
    assert trio_names - aio_names == set(ONLY_TRIO), (
        "the trio Session has public names the asyncio one lacks: add them to "
        "engine/hosts/aio.py, or list them in ONLY_TRIO with the reason")
    assert aio_names - trio_names == set(ONLY_AIO), (
        "the asyncio Session has public names the trio one lacks: add them to "
        "engine/runtime/session.py, or list them in ONLY_AIO with the reason")


def test_the_mirrored_methods_are_both_coroutines_or_both_not() -> None:
    """A method the trio session awaits is awaited from asyncio too, and a plain one stays
    plain (``follow`` and ``deltas`` are iterators and context managers on either side)."""
    plain_or_async = {}
    for name in _public(trio_session.Session) & _public(aio.Session):
        sides = (getattr(trio_session.Session, name), getattr(aio.Session, name))
        kinds = tuple(isinstance(side, property) for side in sides)
        assert kinds[0] == kinds[1], f"{name} is a property on one side only"
        if name not in {"follow", "deltas", "open"}:
            plain_or_async[name] = tuple(inspect.iscoroutinefunction(side) for side in sides)
    assert {name: kind for name, kind in plain_or_async.items() if kind[0] != kind[1]} == {}


def _modules() -> list[ModuleType]:
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for package in (engine, events):
            for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
                if info.name.endswith(".__main__"):
                    continue  # runs the command line when imported
                found.append(importlib.import_module(info.name))
    return found


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _may_be_built_on(base: type) -> bool:
    return (issubclass(base, BaseException) or getattr(base, "_is_protocol", False)
            or inspect.isabstract(base) or _qualified(base) in DECLARED_BASES)


def split_classes(modules: list[ModuleType]) -> dict[str, str]:
    """Each class of ``modules`` whose base is a class of another project module that is not
    made to be built on: ``{class: base}``."""
    found = {}
    for module in modules:
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for base in cls.__bases__:
                if (base.__module__.partition(".")[0] in PROJECT
                        and base.__module__ != cls.__module__ and not _may_be_built_on(base)):
                    found[_qualified(cls)] = _qualified(base)
    return found


def test_no_class_is_split_across_modules() -> None:
    found = split_classes(_modules())
    assert found == {cls: base for cls, (base, _) in NOT_YET_JOINED.items()}, (
        "a class inherits from a class of another module: join them in one module (move a "
        "part out as an object the class holds, or as functions), or, for a base made to be "
        "built on, list it in DECLARED_BASES with the reason")


def test_the_rule_can_fail() -> None:
    """A class built on another module's concrete class is caught; one built on a Protocol,
    an exception or a declared base is not."""
    from engine.core import reducers
    from events.stores import base
    fake = ModuleType("engine.fake")
    for name, parent in [("Half", reducers.Projection), ("Store", base.InlineStore),
                         ("Error", reducers.LogInconsistency), ("Impl", base.EventStore)]:
        setattr(fake, name, type(name, (parent,), {"__module__": "engine.fake"}))
    assert split_classes([fake]) == {"engine.fake.Half": "engine.core.reducers.Projection"}
