"""The fast readers of the events a session opens with: its start, its tools, the user's
message (see :mod:`events.fast.readers`, which picks them).

A store that writes these must otherwise prove their encoding by decoding the line again, so
they are worth a reader though each is written once or a few times a session. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, get_args

from ..types import (
    Annotations,
    ExecutionMode,
    Exposure,
    SessionSettings,
    SessionStarted,
    ToolRegistered,
    ToolSnapshot,
    ToolSource,
    UserMessage,
)
from .fastinit import builder
from .readfields import (
    FALLBACK,
    NESTED,
    exact_fields,
    strict_int,
    strict_object,
    strict_one_of,
    strict_opt_bool,
    strict_opt_int,
    strict_opt_str,
    strict_str,
    view,
)

__all__ = [
    "REGISTERED",
    "SESSION",
    "USER",
    "registered",
    "session_started",
    "user",
]

# The builders of the classes made here (events.fast.fastinit): what calling the class makes, one
# call cheaper, for objects made on every line of a log.
_UserMessage = builder(UserMessage)

_EXPOSURES = frozenset(get_args(Exposure))
_MODES = frozenset(get_args(ExecutionMode))

SESSION = frozenset({"metadata", "settings"})
_SESSION_BARE = SESSION - {"settings"}
_SETTINGS = NESTED[SessionSettings]
_SETTINGS_BARE = _SETTINGS - {"max_artifact_bytes", "model_view"}


def session_started(data: Any) -> SessionStarted:
    """A record's data as ``SessionStarted``; :data:`FALLBACK` for any other shape."""
    # ``settings`` is written only when there are some (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _SESSION_BARE and data.keys() != SESSION):
        raise FALLBACK
    settings = data.get("settings")
    if settings is not None:
        # the two limits of long outputs are absent from older logs
        if type(settings) is not dict or not _SETTINGS_BARE <= settings.keys() <= _SETTINGS:
            raise FALLBACK
        settings = SessionSettings(
            max_turns=strict_int(settings["max_turns"]),
            max_depth=strict_int(settings["max_depth"]),
            max_argument_bytes=strict_int(settings["max_argument_bytes"]),
            max_result_bytes=strict_int(settings["max_result_bytes"]),
            max_artifact_bytes=strict_opt_int(settings.get("max_artifact_bytes")),
            model_view=view(settings.get("model_view")))
    return SessionStarted(metadata=strict_object(data["metadata"]), settings=settings)


REGISTERED = frozenset({"spec"})
_SNAPSHOT, _ANNOTATIONS = NESTED[ToolSnapshot], NESTED[Annotations]
_SNAPSHOT_LOCAL, _SOURCE = _SNAPSHOT - {"source", "model_view"}, NESTED[ToolSource]
_SOURCE_BARE = _SOURCE - {"hints", "hints_trusted"}


def _annotations(hints: Any) -> Annotations:
    exact_fields(hints, _ANNOTATIONS)
    return Annotations(
        title=strict_opt_str(hints["title"]), read_only=strict_opt_bool(hints["read_only"]),
        destructive=strict_opt_bool(hints["destructive"]),
        idempotent=strict_opt_bool(hints["idempotent"]),
        open_world=strict_opt_bool(hints["open_world"]))


def _source(source: Any) -> ToolSource:
    # a mount records the server's hints and whether it trusts them; older logs have neither
    if type(source) is not dict or not _SOURCE_BARE <= source.keys() <= _SOURCE:
        raise FALLBACK
    hints = source.get("hints")
    return ToolSource(server=strict_str(source["server"]),
                      version=strict_opt_str(source["version"]), tool=strict_str(source["tool"]),
                      hints=None if hints is None else _annotations(hints),
                      hints_trusted=strict_opt_bool(source.get("hints_trusted")))


def registered(data: Any) -> ToolRegistered:
    """A record's data as ``ToolRegistered``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, REGISTERED)
    spec = data["spec"]
    # ``source`` is written only for a tool that runs elsewhere (a mounted MCP server's), a
    # ``model_view`` only for a tool that has one
    if type(spec) is not dict or not _SNAPSHOT_LOCAL <= spec.keys() <= _SNAPSHOT:
        raise FALLBACK
    source = spec.get("source")
    if source is not None:
        source = _source(source)
    output, timeout = spec["output_schema"], spec["timeout"]
    if timeout is not None and type(timeout) is not float:
        raise FALLBACK
    return ToolRegistered(spec=ToolSnapshot(
        name=strict_str(spec["name"]), description=strict_str(spec["description"]),
        input_schema=strict_object(spec["input_schema"]),
        output_schema=None if output is None else strict_object(output),
        annotations=_annotations(spec["annotations"]),
        exposure=strict_one_of(spec["exposure"], _EXPOSURES),
        execution_mode=strict_one_of(spec["execution_mode"], _MODES), timeout=timeout,
        source=source, model_view=view(spec.get("model_view"))))


USER = frozenset({"text"})


def user(data: Any) -> UserMessage:
    """A record's data as ``UserMessage``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, USER)
    return _UserMessage(text=strict_str(data["text"]))
