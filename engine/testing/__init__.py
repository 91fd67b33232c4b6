"""Testing tools, handlers and policies with toolledger: Hypothesis strategies, a state machine
that drives a live session, invariants every log must keep, and pytest fixtures.

``pip install toolledger[test]`` brings pytest, pytest-trio and Hypothesis, and registers the
pytest plugin (:mod:`engine.testing.plugin`: the ``faux_model``, ``memory_store`` and
``session_factory`` fixtures). The guide is ``docs/testing.md``. The parts:

- strategies (:mod:`~engine.testing.strategies`, :mod:`~engine.testing.arguments`):
  :func:`tool_annotations`, :data:`ANNOTATION_HINTS`, :func:`tool_names`, :func:`input_schemas`,
  :func:`output_schemas`, :func:`tool_specs`, :func:`tool_sets`, :func:`valid_arguments`,
  :func:`invalid_arguments`, :func:`tool_calls`, :func:`json_values`, :func:`terminal_text`,
  :func:`stop_reasons`;
- scripted sessions (:mod:`~engine.testing.scripts`, over the tools of
  :mod:`~engine.testing.catalogue`): :func:`session_scripts`, :func:`run_script`,
  :func:`event_logs`;
- :class:`SessionMachine` (:mod:`~engine.testing.machine`), to subclass with your tools;
- invariants (:mod:`~engine.testing.invariants`): :func:`check_log`, :func:`check_session`
  and the single checks;
- :class:`BodyRuns` and :func:`counted` (count tool bodies), :func:`counting_clock` and
  :func:`sequential_ids` (deterministic logs).

The strategies and the machine need Hypothesis; they are imported on first use, so the
invariants, the counters and the plugin work without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .catalogue import TOOL_NAMES, UNKNOWN_TOOL, catalogue_tools, nest_tool
from .invariants import (
    check_approvals,
    check_availability,
    check_bodies,
    check_codec,
    check_fold,
    check_log,
    check_model_turns,
    check_nesting,
    check_progress,
    check_session,
    check_store_round_trip,
    check_stored,
    check_terminals,
    check_transcript,
)
from .tools import BodyRuns, counted, counting_clock, sequential_ids

if TYPE_CHECKING:
    from .arguments import invalid_arguments, json_values, valid_arguments
    from .machine import ScriptModel, SessionMachine
    from .scripts import ScriptRun, SessionScript, event_logs, run_script, session_scripts
    from .strategies import (
        ANNOTATION_HINTS,
        input_schemas,
        output_schemas,
        stop_reasons,
        terminal_text,
        tool_annotations,
        tool_calls,
        tool_names,
        tool_sets,
        tool_specs,
    )

_LAZY = {
    "invalid_arguments": "arguments",
    "json_values": "arguments",
    "valid_arguments": "arguments",
    "ScriptModel": "machine",
    "SessionMachine": "machine",
    "ScriptRun": "scripts",
    "SessionScript": "scripts",
    "event_logs": "scripts",
    "run_script": "scripts",
    "session_scripts": "scripts",
    "ANNOTATION_HINTS": "strategies",
    "input_schemas": "strategies",
    "output_schemas": "strategies",
    "stop_reasons": "strategies",
    "terminal_text": "strategies",
    "tool_annotations": "strategies",
    "tool_calls": "strategies",
    "tool_names": "strategies",
    "tool_sets": "strategies",
    "tool_specs": "strategies",
}

__all__ = [
    "ANNOTATION_HINTS",
    "TOOL_NAMES",
    "UNKNOWN_TOOL",
    "BodyRuns",
    "ScriptModel",
    "ScriptRun",
    "SessionMachine",
    "SessionScript",
    "catalogue_tools",
    "check_approvals",
    "check_availability",
    "check_bodies",
    "check_codec",
    "check_fold",
    "check_log",
    "check_nesting",
    "check_progress",
    "check_session",
    "check_store_round_trip",
    "check_stored",
    "check_model_turns",
    "check_terminals",
    "check_transcript",
    "counted",
    "counting_clock",
    "event_logs",
    "input_schemas",
    "invalid_arguments",
    "json_values",
    "nest_tool",
    "output_schemas",
    "run_script",
    "sequential_ids",
    "session_scripts",
    "stop_reasons",
    "terminal_text",
    "tool_annotations",
    "tool_calls",
    "tool_names",
    "tool_sets",
    "tool_specs",
    "valid_arguments",
]


def __getattr__(name: str) -> Any:
    """Import the Hypothesis-based parts on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
