"""Scripted faux sessions over the catalogue: plain data Hypothesis draws, and the harness that
runs one.

:func:`session_scripts` draws a :class:`SessionScript`: which annotations each tool of the
catalogue (:mod:`engine.testing.catalogue`) has, which policy rules, ``tool_call`` and
``tool_result`` handlers and approver answers the session gets, what the faux model says turn
after turn, when the host cancels a prompt, and which tools the host calls itself
(``session.call_tool``, beside the prompts). Model calls mix valid and invalid arguments,
unknown tools, hidden and model-only ones, tools that raise, time out or fail softly, nested
plans and parallel batches (sometimes with a duplicated model call id, or cut off for
``length``). :meth:`SessionScript.build` turns it into fresh live objects (a
:class:`ScriptedSession`); :func:`run_script` runs it on a store and returns a
:class:`ScriptRun`; :func:`event_logs` draws the records such a run wrote. Example::

    @given(session_scripts())
    def test_my_store_keeps_every_log(script):
        run = trio.run(run_script, script, MyStore(), clock=MockClock(autojump_threshold=0))
        assert run.stored_records == run.live_records

What a script is made of, and the live objects a run builds from it, are
:mod:`engine.testing.scriptdata` (every name of it is exported here too); this module draws
scripts and runs them.

A run is a function of the script: the clock and the session id are injected, nothing in a
tool reads a clock or a random source, and Hypothesis seeds trio's scheduler.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import strategies as st

from events.stores import EventStore, MemoryStore
from events.types import Annotations, Record

from ..core.approvals import Approver
from ..core.callids import from_host
from ..core.policy import PolicyRules
from ..runtime.session import Session
from .arguments import weighted
from .catalogue import INT_TOOLS, NOT_JSON, TOOL_NAMES, UNKNOWN_TOOL
from .scriptdata import (
    ANSWERS,
    GRANTING,
    Answer,
    CallHandlerSpec,
    ResultHandlerSpec,
    ScriptedSession,
    SessionScript,
    TurnSpec,
    make_call_handler,
    make_result_handler,
)
from .strategies import stop_reasons
from .tools import counting_clock

__all__ = [
    "ANSWERS",
    "GRANTING",
    "SCRIPT_SESSION_ID",
    "Answer",
    "CallHandlerSpec",
    "ResultHandlerSpec",
    "ScriptRun",
    "ScriptedSession",
    "SessionScript",
    "TurnSpec",
    "call_handler_specs",
    "event_logs",
    "make_call_handler",
    "make_result_handler",
    "policy_patterns",
    "policy_rules",
    "result_handler_specs",
    "run_script",
    "script_calls",
    "script_turns",
    "session_scripts",
]

#: the session id :func:`run_script` gives every session
SCRIPT_SESSION_ID = "scripted-session"

#: virtual seconds after an assistant message at which the host may cancel its prompt
CANCEL_DELAYS: tuple[float, ...] = (0.0, 0.5, 2.0, 4.5)


# -- strategies --------------------------------------------------------------------------------

_hints = st.sampled_from([None, True, False])
_policy_annotations = st.builds(
    lambda r, d, o: Annotations(read_only=r, destructive=d, open_world=o), _hints, _hints, _hints)
_valid_int_args = st.builds(lambda n: {"n": n}, st.integers(0, 9))
_invalid_args = st.sampled_from([{}, {"n": "x"}, {"n": 1, "extra": True}, {"n": 1.5}, ["n"],
                                 NOT_JSON])


def _plan_step(call: tuple[str, Any], forward: bool) -> dict[str, Any]:
    """One step of a ``nest`` plan: the call, and whether ``nest`` forwards its progress."""
    step = {"name": call[0], "arguments": call[1]}
    return {**step, "forward": True} if forward else step


def script_calls(depth: int = 3) -> st.SearchStrategy[tuple[str, Any]]:
    """A call as ``(name, arguments)`` to the catalogue (or to an unknown tool); ``nest``
    calls carry plans up to ``depth`` deep, some of whose steps forward their progress."""
    simple = st.tuples(st.sampled_from((*INT_TOOLS, UNKNOWN_TOOL)),
                       st.sampled_from([True, True, False]).flatmap(
                           lambda valid: _valid_int_args if valid else _invalid_args))
    if depth <= 0:
        return simple
    plan = st.lists(st.builds(_plan_step, script_calls(depth - 1), st.booleans()), max_size=3)
    nested = st.tuples(st.just("nest"), st.builds(lambda p: {"plan": p}, plan))
    return st.sampled_from(["simple"] * 4 + ["nested"]).flatmap(
        lambda kind: simple if kind == "simple" else nested)


def script_turns(max_calls: int = 4, depth: int = 3,
                 cancellations: bool = True) -> st.SearchStrategy[TurnSpec]:
    """One assistant message of 0 to ``max_calls`` calls (a parallel batch when several)."""
    batch = st.lists(script_calls(depth), min_size=1, max_size=max_calls).map(tuple)
    cancel = (st.sampled_from([None] * 8 + list(CANCEL_DELAYS)) if cancellations
              else st.none())
    with_calls = st.builds(
        TurnSpec,
        calls=batch,
        duplicate_ids=st.sampled_from([False] * 9 + [True]),
        stop_reason=weighted((9, st.just("stop")), (1, stop_reasons())),
        cancel_after=cancel,
    )
    return st.one_of(st.just(TurnSpec()), with_calls, with_calls, with_calls)


policy_patterns = st.sampled_from([*TOOL_NAMES, "read_*", "*_step", "s*", "model_?nly"])
_name_sets = st.frozensets(st.sampled_from(TOOL_NAMES), max_size=3)
call_handler_specs = st.one_of(
    st.builds(CallHandlerSpec, kind=st.just("block"), names=_name_sets),
    st.builds(CallHandlerSpec, kind=st.just("rewrite"), names=_name_sets,
              mode=st.sampled_from(["bump", "bump", "break"])),
    st.builds(CallHandlerSpec, kind=st.just("raise"), names=_name_sets),
    st.builds(CallHandlerSpec, kind=st.just("pass")),
)
result_handler_specs = st.builds(ResultHandlerSpec, kind=st.sampled_from(["patch", "raise"]),
                                  names=_name_sets)


def policy_rules(
    patterns: st.SearchStrategy[str] = policy_patterns,
) -> st.SearchStrategy[PolicyRules]:
    """Host rules by tool name: mostly none, sometimes a pattern or two to allow, deny or ask
    (drawn from ``patterns``; default: the catalogue's names and a few globs)."""
    sparse = st.lists(patterns, max_size=2)
    some: st.SearchStrategy[list[str]] = st.one_of(st.just([]), st.just([]), sparse)
    return st.builds(lambda allow, deny, ask: PolicyRules(allow=allow, deny=deny, ask=ask),
                     some, some, some)


def session_scripts(
    max_turns: int = 5, *, cancellations: bool = True
) -> st.SearchStrategy[SessionScript]:
    """A whole scripted session over the catalogue (see the module docstring).

    ``cancellations=False`` leaves out the host's cancellations (a script then cancels only
    through tool timeouts)."""
    rules = policy_rules()
    return st.builds(
        SessionScript,
        annotations=st.fixed_dictionaries({name: _policy_annotations for name in TOOL_NAMES}),
        rules=rules,
        answers=st.fixed_dictionaries({name: st.sampled_from(ANSWERS) for name in TOOL_NAMES}),
        call_handlers=st.lists(call_handler_specs, max_size=3).map(tuple),
        result_handlers=st.lists(result_handler_specs, max_size=2).map(tuple),
        turns=st.lists(script_turns(cancellations=cancellations), min_size=1,
                       max_size=max_turns).map(tuple),
        max_depth=st.sampled_from([8, 8, 2, 1]),
        host_calls=st.one_of(st.just(()), st.lists(script_calls(), max_size=3).map(tuple)),
    )


# -- running -----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ScriptRun:
    """What one run of a script left behind."""

    harness: ScriptedSession
    live_records: tuple[Record, ...]
    stored_records: tuple[Record, ...]
    snapshot: Any
    open_calls: tuple[str, ...]
    pending_approvals: tuple[str, ...]
    transcript: tuple[Any, ...]
    prompts: int
    #: the turns (assistant message numbers) whose prompt the host cancelled
    cancelled_turns: tuple[int, ...] = ()


async def run_script(script: SessionScript, store: EventStore | None = None, *,
                     approver: Approver | None = None) -> ScriptRun:
    """Run ``script`` on ``store`` (a new :class:`~events.MemoryStore` by default): prompt
    until the model's script is used up, cancelling the prompts the script cancels. Run it
    under ``MockClock(autojump_threshold=0)``; raises ``AssertionError`` if a prompt leaves a
    call open. ``approver`` answers instead of the script's own (which answers by tool, as
    drawn, and records whom it was asked about)."""
    store = store if store is not None else MemoryStore()
    harness = script.build()
    left_open: list[tuple[int, tuple[str, ...]]] = []
    cancelled_turns: list[int] = []
    async with Session.open(store, model=harness.model, tools=harness.tools,
                            approver=approver or harness.approver, rules=script.rules,
                            max_depth=script.max_depth, clock=counting_clock(),
                            new_session_id=lambda: SCRIPT_SESSION_ID) as session:
        for handler in harness.call_handlers:
            session.on_tool_call(handler)
        for result_handler in harness.result_handlers:
            session.on_tool_result(result_handler)
        prompts = 0
        async with trio.open_nursery() as hosts:
            for name, arguments in script.host_calls:
                hosts.start_soon(harness.call_host, session, name, arguments)
            while harness.model.remaining:
                with trio.CancelScope() as scope:
                    harness.scope = scope
                    await session.prompt(f"prompt {prompts}")
                harness.scope = None
                if scope.cancelled_caught:
                    cancelled_turns.append(session.state.turn)
                prompts += 1
                # a host call is its caller's to wait for, not the prompt's
                if left := tuple(c for c in session.state.open_calls if not from_host(c)):
                    left_open.append((prompts, left))
        harness.model.assert_complete()
        live = tuple(session.records)
        state = session.state
        snapshot = state.snapshot()
        open_calls = state.open_calls
        pending = state.pending_approvals
        transcript = tuple(session.transcript)
    assert not left_open, f"prompts left calls open: {left_open}"
    stored = tuple(await store.read(SCRIPT_SESSION_ID))
    return ScriptRun(harness=harness, live_records=live, stored_records=stored,
                     snapshot=snapshot, open_calls=open_calls, pending_approvals=pending,
                     transcript=transcript, prompts=prompts,
                     cancelled_turns=tuple(cancelled_turns))


def _run_for_log(script: SessionScript) -> list[Record]:
    run = trio.run(run_script, script, MemoryStore(),
                   clock=trio.testing.MockClock(autojump_threshold=0))
    return list(run.stored_records)


def event_logs(
    scripts: st.SearchStrategy[SessionScript] | None = None,
) -> st.SearchStrategy[list[Record]]:
    """The records a real session wrote: a drawn script (default :func:`session_scripts`)
    run on a :class:`~events.MemoryStore` in virtual time.

    Each draw runs a whole session with ``trio.run``, so draw it outside a trio loop (as
    ``@given`` arguments, not with ``data.draw`` inside an async test). Example::

        @given(event_logs())
        def test_my_exporter_reads_every_log(records):
            assert my_export(records)
    """
    return (scripts if scripts is not None else session_scripts()).map(_run_for_log)
