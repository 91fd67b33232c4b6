"""The strategies and harness of our property tests, under the names the tests used before
they moved into :mod:`engine.testing` (where users get them too): see
:mod:`engine.testing.scripts` for scripted sessions and :mod:`engine.testing.catalogue` for the
tools they run. ``session_scripts`` here leaves out the host's cancellations by default.

Below them, :func:`values_of` and :func:`instances_of`: values of the log's own types (every
event class, with each field set or left to its default), drawn from the classes' type hints,
so a class or field added tomorrow is drawn without a change here."""

from __future__ import annotations

import collections.abc
import enum
import types
import typing
from typing import Any, Literal, Union

import attrs
from hypothesis import HealthCheck, Phase, reject, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from engine.testing.catalogue import (
    INT_SCHEMA,
    INT_TOOLS,
    NEST_TIMEOUT,
    NOT_JSON,
    PLAN_SCHEMA,
    SHAPED_OUTPUT,
    SLOW_TIMEOUT,
    TOOL_NAMES,
    UNKNOWN_TOOL,
)
from engine.testing.scripts import (
    ANSWERS,
    GRANTING,
    SCRIPT_SESSION_ID,
    Answer,
    CallHandlerSpec,
    ResultHandlerSpec,
    ScriptedSession,
    ScriptRun,
    SessionScript,
    TurnSpec,
    run_script,
    script_calls,
    script_turns,
)
from engine.testing.scripts import session_scripts as _session_scripts
from engine.testing.strategies import tool_annotations
from engine.testing.tools import counting_clock

__all__ = [
    "ANSWERS",
    "GRANTING",
    "INT_SCHEMA",
    "INT_TOOLS",
    "NEST_TIMEOUT",
    "NOT_JSON",
    "PLAN_SCHEMA",
    "SESSION_ID",
    "SHAPED_OUTPUT",
    "SLOW_TIMEOUT",
    "TOOL_NAMES",
    "UNKNOWN_TOOL",
    "Answer",
    "CallHandlerSpec",
    "ResultHandlerSpec",
    "RunOutcome",
    "ScriptedSession",
    "SessionScript",
    "TurnSpec",
    "annotations",
    "calls",
    "instances_of",
    "json_values",
    "counting_clock",
    "run_script",
    "session_scripts",
    "turns",
    "values_of",
]

SESSION_ID = SCRIPT_SESSION_ID


def session_scripts(max_turns: int = 5, *, cancellations: bool = False):  # type: ignore[no-untyped-def]
    """:func:`engine.testing.session_scripts`, without the host's cancellations unless asked
    (the scripts these tests were written for had none)."""
    return _session_scripts(max_turns, cancellations=cancellations)
RunOutcome = ScriptRun
annotations = tool_annotations
calls = script_calls
turns = script_turns


# -- values of the log's own types ------------------------------------------------------------

#: Any JSON value, as a log holds it (lists, not tuples; no NaN or infinity).
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)


def values_of(hint: Any) -> st.SearchStrategy[Any]:
    """Values of the type ``hint`` (as ``typing.get_type_hints`` gives it): JSON values for
    ``Any``, instances for attrs classes (see :func:`instances_of`), members for literals and
    enums, each member of a union (``None`` included). A type the log does not use is a
    ``TypeError`` naming it, so a new kind of field is noticed, not drawn as nothing."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return json_values
    if hint is type(None):
        return st.none()
    if hint in (str, int, bool):
        return {str: st.text(max_size=8), int: st.integers(), bool: st.booleans()}[hint]
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if origin is Literal:
        return st.sampled_from(typing.get_args(hint))
    if origin in (Union, types.UnionType):
        return st.one_of([values_of(arg) for arg in typing.get_args(hint)])
    if origin is tuple:
        item, dots = typing.get_args(hint)
        if dots is not Ellipsis:
            raise TypeError(f"no strategy for the fixed-length tuple {hint}")
        return st.lists(values_of(item), max_size=3).map(tuple)
    if origin in (list, frozenset, collections.abc.Sequence):
        (item,) = typing.get_args(hint)
        items = st.lists(values_of(item), max_size=3)
        return items.map(frozenset) if origin is frozenset else items
    if origin in (dict, collections.abc.Mapping):
        key, value = typing.get_args(hint)
        return st.dictionaries(values_of(key), values_of(value), max_size=3)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if isinstance(hint, type) and attrs.has(hint):
        return instances_of(hint)
    raise TypeError(f"no strategy for values of {hint!r}")


def keyword_arguments(cls: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """The keyword arguments of an attrs class: every required field, and each field with a
    default either given a drawn value or left out (so both set and unset are drawn)."""
    hints = typing.get_type_hints(cls)
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in attrs.fields(cls):
        strategy = st.deferred(lambda hint=hints[field.name]: values_of(hint))
        (required if field.default is attrs.NOTHING else optional)[field.name] = strategy
    return st.fixed_dictionaries(required, optional=optional)


def instances_of(cls: type[Any]) -> st.SearchStrategy[Any]:
    """Instances of an attrs class, built by its ``__init__`` from :func:`keyword_arguments`
    (values its validators refuse are drawn again)."""

    def build(kwargs: dict[str, Any]) -> Any:
        try:
            return cls(**kwargs)
        except (TypeError, ValueError):
            reject()

    return keyword_arguments(cls).map(build)


# no explain phase: it replays a failing example many times, and each one is two sessions.
# The number of examples is the profile's (tests/conftest.py: ci or nightly).
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    phases=[phase for phase in Phase if phase is not Phase.explain])


def virtual_clock() -> MockClock:
    """Virtual time that jumps ahead whenever every task sleeps: timeouts without waiting."""
    return MockClock(autojump_threshold=0)
