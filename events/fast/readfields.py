"""What every fast reader of :mod:`events.fast.readers` is made of: the strict checks of one JSON
value each, :class:`Fallback` for a value they cannot vouch for, and :data:`NESTED`, the
classes inside events that the readers build themselves.

Each check takes exactly the type :func:`events.codec.encode_record` writes (a ``bool`` is not
an ``int`` here) and raises :data:`FALLBACK` for anything else, so that the converter decides.
The readers of each family of events (:mod:`events.fast.callreaders`, :mod:`events.fast.sessionreaders`,
:mod:`events.fast.turnreaders`) are built from these. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ..modelturns import Usage
from ..results import ErrorInfo, KeptResult, ModelView, TextContent, ToolResult
from ..types import (
    Annotations,
    FailureDetail,
    ModelToolCall,
    ProviderContent,
    SessionSettings,
    ToolSnapshot,
    ToolSource,
)

__all__ = [
    "FALLBACK",
    "NESTED",
    "Fallback",
    "exact_fields",
    "strict_int",
    "strict_object",
    "strict_one_of",
    "strict_opt_bool",
    "strict_opt_int",
    "strict_opt_str",
    "strict_str",
    "view",
]


class Fallback(Exception):
    """The fast reader cannot vouch for a value: the converter decides."""


#: The one instance every check raises.
FALLBACK = Fallback()


def exact_fields(data: Any, names: frozenset[str]) -> None:
    """A JSON object with exactly the keys ``names``."""
    if type(data) is not dict or data.keys() != names:
        raise FALLBACK


def strict_str(value: Any) -> str:
    """A string."""
    if type(value) is not str:
        raise FALLBACK
    return value


def strict_opt_str(value: Any) -> str | None:
    """A string or ``None``."""
    if value is not None and type(value) is not str:
        raise FALLBACK
    return value


def strict_int(value: Any) -> int:
    """An integer (not a ``bool``)."""
    if type(value) is not int:
        raise FALLBACK
    return value


def strict_opt_bool(value: Any) -> bool | None:
    """A ``bool`` or ``None``."""
    if value is not None and type(value) is not bool:
        raise FALLBACK
    return value


def strict_object(value: Any) -> dict[str, Any]:
    """A JSON object whose values are anyone's (a field of type ``dict[str, Any]``)."""
    if type(value) is not dict or any(type(key) is not str for key in value):
        raise FALLBACK
    return value


def strict_one_of(value: Any, allowed: frozenset[str]) -> Any:
    """One of the strings ``allowed`` (a ``Literal`` type's values)."""
    if type(value) is not str or value not in allowed:
        raise FALLBACK
    return value


def strict_opt_int(value: Any) -> int | None:
    """An integer (not a ``bool``) or ``None``."""
    if value is not None and type(value) is not int:
        raise FALLBACK
    return value


#: The classes inside events that the readers build themselves, with the fields they read.
NESTED: dict[type[Any], frozenset[str]] = {
    ModelToolCall: frozenset({"id", "name", "arguments", "model_name"}),
    ToolResult: frozenset({"content", "structured_content", "is_error"}),
    TextContent: frozenset({"text", "type"}),
    ErrorInfo: frozenset({"type", "message", "traceback"}),
    FailureDetail: frozenset({"limit", "size", "type", "path", "problem", "value"}),
    SessionSettings: frozenset({"max_turns", "max_depth", "max_argument_bytes",
                                "max_result_bytes", "max_artifact_bytes", "model_view"}),
    ToolSnapshot: frozenset({"name", "description", "input_schema", "output_schema",
                             "annotations", "exposure", "execution_mode", "timeout", "source",
                             "model_view"}),
    Annotations: frozenset({"title", "read_only", "destructive", "idempotent", "open_world"}),
    ModelView: frozenset({"max_bytes", "max_lines"}),
    KeptResult: frozenset({"size", "sha256", "whole"}),
    ToolSource: frozenset({"server", "version", "tool", "hints", "hints_trusted"}),
    ProviderContent: frozenset({"api", "items"}),
    Usage: frozenset({"input_tokens", "output_tokens", "cached_tokens"}),
}


_VIEW = frozenset({"max_bytes", "max_lines"})


def view(value: Any) -> ModelView | None:
    """A :class:`~events.results.ModelView` as the codec writes it (only the limits it has)."""
    if value is None:
        return None
    if type(value) is not dict or not value.keys() <= _VIEW:
        raise FALLBACK
    try:
        return ModelView(max_bytes=strict_opt_int(value.get("max_bytes")),
                         max_lines=strict_opt_int(value.get("max_lines")))
    except ValueError:
        raise FALLBACK from None  # the converter refuses it, in its words
