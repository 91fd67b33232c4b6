"""toolledger's events: what happened. Event types, the codec, and the log stores.

This package never imports ``engine``: the facts do not depend on what produces them.
"""

from .codec import decode_line, decode_record, encode_line, encode_record
from .errors import CodecError, ConflictError, CorruptLogError, LogError
from .results import ToolResult, text
from .stores import EventStore, JsonlStore, MemoryStore
from .types import SCHEMA_VERSION, Record

__all__ = [
    "SCHEMA_VERSION",
    "CodecError",
    "ConflictError",
    "CorruptLogError",
    "EventStore",
    "JsonlStore",
    "LogError",
    "MemoryStore",
    "Record",
    "ToolResult",
    "decode_line",
    "decode_record",
    "encode_line",
    "encode_record",
    "text",
]
