"""toolledger's events: what happened. Event types, the codec, the log stores, integrity.

This package never imports ``engine``: the facts do not depend on what produces them.
"""

from .codec import decode_line, decode_record, encode_line, encode_record
from .errors import (
    ArtifactError,
    CodecError,
    ConflictError,
    CorruptLogError,
    DatabaseSchemaError,
    LogError,
    SessionError,
    SessionInUse,
    SessionNotFound,
    SessionRowError,
    ToolledgerError,
    UnverifiedRecordError,
)
from .integrity import GENESIS, Anchor, VerifyReport, verify_lines
from .modelturns import (
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ProviderContent,
    SystemPromptSet,
    Usage,
)
from .renamed import moved_modules
from .results import ToolResult, text
from .stores import EventStore, JsonlStore, MemoryStore, SqliteStore, open_store
from .stores.jsonl import verify_jsonl
from .types import SCHEMA_VERSION, Record

__all__ = [
    "GENESIS",
    "SCHEMA_VERSION",
    "Anchor",
    "ArtifactError",
    "CodecError",
    "ConflictError",
    "CorruptLogError",
    "DatabaseSchemaError",
    "EventStore",
    "JsonlStore",
    "LogError",
    "MemoryStore",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "ProviderContent",
    "Record",
    "SessionError",
    "SessionInUse",
    "SessionNotFound",
    "SessionRowError",
    "SqliteStore",
    "SystemPromptSet",
    "ToolResult",
    "ToolledgerError",
    "UnverifiedRecordError",
    "Usage",
    "VerifyReport",
    "decode_line",
    "decode_record",
    "encode_line",
    "encode_record",
    "open_store",
    "text",
    "verify_jsonl",
    "verify_lines",
]

#: Modules that moved (the fast paths into events.fast; model turns out of engine.models'
#: way) or were renamed (stores.pgclaims, named for the claims it holds): the old path still
#: imports the module, with a warning naming the new one.
MOVED_MODULES = {
    "events.callreaders": "events.fast.callreaders",
    "events.fastinit": "events.fast.fastinit",
    "events.models": "events.modelturns",
    "events.prepared": "events.fast.prepared",
    "events.readers": "events.fast.readers",
    "events.readfields": "events.fast.readfields",
    "events.sessionreaders": "events.fast.sessionreaders",
    "events.stores.pglease": "events.stores.pgclaims",
    "events.turnreaders": "events.fast.turnreaders",
}
moved_modules(MOVED_MODULES)
