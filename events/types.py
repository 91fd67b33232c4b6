"""The event catalogue: every fact a session can record, as frozen values.

The classes made on every call (the record and the call's events) are built by
:func:`~events.fast.fastinit.fast_init` and have no ``__weakref__`` slot: a session keeps five of
each per call, and values are not weakly referenced.

A session's log is a sequence of :class:`Record`\\ s, each wrapping one event. Events say what
happened and nothing else: no behaviour, no I/O, no clock (the record's ``time`` comes from the
clock the runtime was given). The lifecycle of one call, and which event may follow which, is
the transition table in :mod:`engine.core.lifecycle`; the JSON shape is in :mod:`events.codec`.

The catalogue is split by whom an event is about: a call (:mod:`events.callevents`), the
session outside its calls (:mod:`events.sessionevents`), the model's turns
(:mod:`events.modelturns`), with the values they carry in :mod:`events.results`. Every public name
is imported from here. This module holds what spans them: the :class:`Record` every event is
wrapped in, the :data:`Event` union and :data:`SCHEMA_VERSION`.

Events about a call carry the engine's ``call_id`` (``"{turn}.{index}"`` for the model's
calls, ``"h{n}"`` for the host's, ``"{parent}/{n}"`` for nested ones). ``arguments`` and ``structured_content`` are JSON
values; the engine checks that before it records them.
"""

from __future__ import annotations

from typing import Union

import attrs

from .callevents import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    ApprovalResolved,
    CallEvent,
    Decision,
    FailureKind,
    Origin,
    PolicyDecided,
    ProgramSuspended,
    QuestionAction,
    QuestionAnswered,
    QuestionAsked,
    ResultHandlerFailed,
    Scope,
    TerminalEvent,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
)
from .fast.fastinit import fast_init
from .modelturns import (
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ProviderContent,
    SystemPromptSet,
)
from .results import FailureDetail, JsonPath, KeptResult, ModelView, NotJsonProblem
from .sessionevents import (
    ActiveToolsSet,
    Annotations,
    AssistantMessage,
    ExecutionMode,
    Exposure,
    ModelToolCall,
    SessionSettings,
    SessionStarted,
    ToolRegistered,
    ToolSnapshot,
    ToolSource,
    ToolsActivated,
    UserMessage,
)

__all__ = [
    "SCHEMA_VERSION",
    "ActiveToolsSet",
    "Annotations",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantMessage",
    "CallEvent",
    "Decision",
    "Event",
    "Exposure",
    "ExecutionMode",
    "FailureDetail",
    "FailureKind",
    "JsonPath",
    "KeptResult",
    "ModelView",
    "NotJsonProblem",
    "ModelEvent",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "ModelToolCall",
    "ProviderContent",
    "SystemPromptSet",
    "Origin",
    "PolicyDecided",
    "ProgramSuspended",
    "QuestionAction",
    "QuestionAnswered",
    "QuestionAsked",
    "Record",
    "Scope",
    "ResultHandlerFailed",
    "SessionSettings",
    "SessionStarted",
    "TERMINAL_EVENTS",
    "TerminalEvent",
    "ToolCallBlocked",
    "ToolCallCancelled",
    "ToolCallCompleted",
    "ToolCallDenied",
    "ToolCallFailed",
    "ToolCallRequested",
    "ToolCallRewritten",
    "ToolExecutionStarted",
    "ToolProgress",
    "ToolRegistered",
    "ToolSnapshot",
    "ToolSource",
    "ToolsActivated",
    "UserMessage",
]

#: Version of the record format this code writes. A record with a newer version is refused;
#: older ones are read through :data:`events.codec.UPCASTERS`. 1: the first format.
#: 2: each stored line carries the hash chain's ``"hash"`` (see :mod:`events.integrity`).
#: 3: facts carry their data: a session's settings on its start, a failure's detail, the rule
#: a decision names, whether an answer was given at a pause (see :mod:`events.upcasters`).
SCHEMA_VERSION = 3

ModelEvent = Union[SystemPromptSet, ModelRequested, ModelResponded, ModelFailed]
Event = Union[
    SessionStarted, ToolRegistered, ActiveToolsSet, UserMessage, AssistantMessage, ModelEvent,
    CallEvent, ToolsActivated,
]


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class Record:
    """One line of the log: an event with where and when it happened.

    ``seq`` is contiguous from 1 within a session; ``time`` is seconds since the epoch from the
    runtime's injected clock; ``version`` is the record format's version: :data:`SCHEMA_VERSION`
    for records made now, and for a record read from a log the version it was written in
    (its fields are always the current version's). Stores write current-version records only.
    The chain hash is not here: it belongs to the stored line, not to the fact.
    """

    session_id: str
    seq: int
    time: float
    event: Event
    version: int = SCHEMA_VERSION
