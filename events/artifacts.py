"""Artifacts: the whole of a result too large for the log, kept beside it by the store.

A call whose result is over the session's ``max_result_bytes`` (and within its
``max_artifact_bytes``) records what the model read, a cut of the result, and a
:class:`~events.results.KeptResult` naming the whole by the SHA-256 of its bytes. The store
keeps those bytes as an *artifact*, named by the session, the call and the hash; the hash is
in a record the chain covers, so an artifact that was changed, cut short or lost is found by
``verify`` (:func:`artifact_problem`) and refused when read (:func:`decode_artifact`).

An artifact's bytes are the result as the codec writes it (compact JSON, UTF-8): one format
with the log's, readable with ``jq``. The hash is plain SHA-256 even in a keyed store: the
record that names it is what the key vouches for. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .codec import converter
from .errors import ArtifactError
from .jsontext import dumps_compact, loads_strict
from .results import ToolResult
from .types import Record, ToolCallCompleted

__all__ = [
    "artifact_name",
    "artifact_of",
    "artifact_problem",
    "decode_artifact",
    "encode_artifact",
]

_SAFE = re.compile(r"[A-Za-z0-9_.~-]{1,100}")


def encode_artifact(result: ToolResult) -> tuple[bytes, str]:
    """The bytes a store keeps for ``result``, and their SHA-256 (64 lowercase hex digits)."""
    data: Any = converter.unstructure(result)
    try:
        raw = dumps_compact(data).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept, escaped, as a log line keeps it
        raw = json.dumps(data, ensure_ascii=True, separators=(",", ":"),
                         allow_nan=False).encode("ascii")
    return raw, hashlib.sha256(raw).hexdigest()


def artifact_problem(data: bytes | None, sha256: str) -> str | None:
    """What is wrong with an artifact's bytes (``None`` for bytes not found), or ``None`` if
    they are the ones the hash names."""
    if data is None:
        return "is missing"
    if hashlib.sha256(data).hexdigest() != sha256:
        return f"does not match its hash ({len(data)} bytes: changed or cut short)"
    return None


def decode_artifact(data: bytes | None, session_id: str, call_id: str,
                    sha256: str) -> ToolResult:
    """The whole result an artifact holds; :class:`~events.errors.ArtifactError` if its
    bytes are missing (``None``) or are not the ones the hash names."""
    problem = artifact_problem(data, sha256)
    if problem is not None:
        raise ArtifactError(session_id, call_id, sha256, problem)
    assert data is not None
    try:
        return converter.structure(loads_strict(data.decode("utf-8")), ToolResult)
    except Exception as exc:  # the hash matched: bytes a store wrote, from another version
        raise ArtifactError(session_id, call_id, sha256, f"cannot be read ({exc})") from exc


def artifact_of(record: Record) -> tuple[str, str] | None:
    """``(call_id, sha256)`` of the artifact a record names, or ``None`` if it names none
    (the store must hold it for the record to verify)."""
    event = record.event
    if type(event) is ToolCallCompleted and event.kept is not None and event.kept.whole is None:
        return event.call_id, event.kept.sha256
    return None


def artifact_name(session_id: str, call_id: str, sha256: str) -> str:
    """A file name for an artifact, unique in a store: ``<session>/<call>-<sha256>.json``,
    each name as it is when it is safe in a path (``/`` of a nested call's id becomes
    ``~``), else the SHA-256 of it."""
    return f"{_part(session_id)}/{_part(call_id.replace('/', '~'))}-{sha256}.json"


def _part(name: str) -> str:
    if _SAFE.fullmatch(name) and not name.startswith("."):
        return name
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
