"""Hand-written readers for the events a call writes, and those a session opens with: the
fast path of decoding.

The converter in :mod:`events.codec` is the reference: it decides what a record means and says
what is wrong with one. Folding a log decodes every line, and the converter's general
machinery (tagged unions, validators, detailed errors) makes that about a fifth slower than
these readers (docs/performance.md, "One codec"), so the events written on every call have one;
so do those a session opens with (its start, its tools, the user's message), whose encoding
a store must otherwise prove by decoding the line again.

Each reader takes only the exact shape :func:`events.codec.encode_record` writes, with the
strict types, and builds the event directly; anything else raises :class:`Fallback`, and the
converter decides. The one place that picks the path is the codec's ``decode_record``.

This module is the table of them all; the readers live with their family of events:
:mod:`events.fast.callreaders` (what a call writes), :mod:`events.fast.sessionreaders` (what a session
opens with), :mod:`events.fast.turnreaders` (a model turn), all built from the strict checks of
:mod:`events.fast.readfields`.

:data:`READERS` lists every event class, with its reader or ``None`` (the converter alone, on
purpose). The codec's tests check, for every event class and with values of every field set
and unset, that a reader returns exactly what the converter does and does not fall back on a
record the codec wrote; :func:`drift` names a field a reader was not written for. At run time
a class that drifted is left to the converter (still correct, only slower). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import attrs

from ..types import (
    ActiveToolsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    PolicyDecided,
    QuestionAnswered,
    QuestionAsked,
    ProgramSuspended,
    ResultHandlerFailed,
    SessionStarted,
    SystemPromptSet,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolsActivated,
    UserMessage,
)
from . import callreaders as calls
from . import sessionreaders as sessions
from . import turnreaders as turns
from .readfields import NESTED, Fallback

__all__ = ["FAST", "NESTED", "READERS", "Fallback", "Reader", "drift"]


class Reader(NamedTuple):
    """A fast reader, and the names of the fields it was written for."""

    fields: frozenset[str]
    read: Callable[[Any], Any]


#: Every event class, with its fast reader or ``None``: ``None`` leaves that class to the
#: converter on purpose (it is written neither on every call nor when a session opens, so a
#: reader would not pay). A new
#: event class needs an entry here, and a new field of a class with a reader needs the reader
#: to read it: the codec's tests fail, naming the class and the field, until they have one.
READERS: dict[type[Any], Reader | None] = {
    SessionStarted: Reader(sessions.SESSION, sessions.session_started),
    ToolRegistered: Reader(sessions.REGISTERED, sessions.registered),
    ActiveToolsSet: None,
    UserMessage: Reader(sessions.USER, sessions.user),
    AssistantMessage: Reader(turns.ASSISTANT, turns.assistant),
    ToolCallRequested: Reader(calls.REQUESTED, calls.requested),
    ToolCallRewritten: Reader(calls.REWRITTEN, calls.rewritten),
    PolicyDecided: Reader(calls.POLICY, calls.policy),
    ApprovalRequested: Reader(calls.ASKED, calls.approval_requested),
    ApprovalResolved: Reader(calls.RESOLVED, calls.approval_resolved),
    ToolExecutionStarted: Reader(calls.STARTED, calls.started),
    ToolProgress: None,
    QuestionAsked: None,
    QuestionAnswered: None,
    ProgramSuspended: None,
    ResultHandlerFailed: None,
    ToolCallCompleted: Reader(calls.COMPLETED, calls.completed),
    ToolCallFailed: Reader(calls.FAILED, calls.failed),
    ToolCallBlocked: None,
    ToolCallDenied: None,
    ToolCallCancelled: None,
    ToolsActivated: None,
    # a model turn writes these two every turn (measured: docs/performance.md)
    ModelRequested: Reader(turns.MODEL_REQUESTED, turns.model_requested),
    ModelResponded: Reader(turns.MODEL_RESPONDED, turns.model_responded),
    SystemPromptSet: None,
    ModelFailed: None,
}


def drift() -> list[str]:
    """Every field a reader was not written for, and every field it reads that its class no
    longer has, as sentences that name the class and the field; empty while the readers are in
    step with the classes."""
    declared = {cls: reader.fields for cls, reader in READERS.items() if reader is not None}
    problems = []
    for cls, names in {**declared, **NESTED}.items():
        table = "READERS" if cls in declared else "NESTED"
        fields = [field.name for field in attrs.fields(cls)]
        problems += [f"{cls.__name__}.{name} has no entry in the fast path: read it in the "
                     f"reader of its family (events/*readers.py) and add it to "
                     f"{cls.__name__}'s field names in {table}"
                     for name in fields if name not in names]
        problems += [f"{cls.__name__}.{name} is read by the fast path (events/*readers.py, "
                     f"{table}) but is no longer a field of {cls.__name__}"
                     for name in names if name not in fields]
    return problems


def _in_step(cls: type[Any], names: frozenset[str]) -> bool:
    return {field.name for field in attrs.fields(cls)} == names


#: The readers in use, by class: those in step with their class, while the classes they build
#: inside events are in step too. A class that drifted (see :func:`drift`) is left out, so
#: the converter reads it.
FAST: dict[type[Any], Callable[[Any], Any]] = (
    {cls: reader.read for cls, reader in READERS.items()
     if reader is not None and _in_step(cls, reader.fields)}
    if all(_in_step(cls, names) for cls, names in NESTED.items())
    else {}
)
