"""The strategies and harness of our property tests, under the names the tests used before
they moved into :mod:`engine.testing` (where users get them too): see
:mod:`engine.testing.scripts` for scripted sessions and :mod:`engine.testing.catalogue` for the
tools they run. ``session_scripts`` here leaves out the host's cancellations by default."""

from __future__ import annotations

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
    "counting_clock",
    "run_script",
    "session_scripts",
    "turns",
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
