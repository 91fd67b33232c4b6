"""toolledger's engine: what makes tool calls happen, and records every step.

The public face::

    from engine import Session, tool, Annotations, ToolResult, text, approve_all
    from engine.models import FauxModel, faux_tool_call, faux_text
    from events import JsonlStore, MemoryStore
"""

from typing import Any

from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
    text,
)
from events.types import Annotations

from .approvals import (
    LATER,
    ApprovalAnswer,
    ApprovalRequest,
    approve_all,
    at_once,
    deny_all,
    terminal_approver,
)
from .context import CallOutcome, ToolContext
from .handlers import Block, ResultPatch, Rewrite, ToolCallDraft, ToolResultDraft
from .lifecycle import LifecycleError
from .limits import Limits
from .policy import PolicyRules, needs_approval
from .reducers import CallView, LogInconsistency, Projection, fold
from .renamed import renamed_attribute
from .schemas import SchemaError
from .session import PromptResult, Session
from .tools import ToolCall, ToolSpec, tool

__all__ = [
    "LATER",
    "Annotations",
    "ApprovalAnswer",
    "ApprovalRequest",
    "AudioContent",
    "Block",
    "CallOutcome",
    "CallView",
    "EmbeddedResource",
    "ImageContent",
    "LifecycleError",
    "Limits",
    "LogInconsistency",
    "PolicyRules",
    "Projection",
    "PromptResult",
    "ResourceLink",
    "ResultPatch",
    "Rewrite",
    "SchemaError",
    "Session",
    "TextContent",
    "ToolCall",
    "ToolCallDraft",
    "ToolContext",
    "ToolResult",
    "ToolResultDraft",
    "ToolSpec",
    "approve_all",
    "at_once",
    "deny_all",
    "fold",
    "needs_approval",
    "terminal_approver",
    "text",
    "tool",
]

#: Public names renamed since they shipped: the old name still works, with a warning naming
#: the new one (docs/concepts.md, "Words").
_RENAMED = {
    "ApprovalDecision": "ApprovalAnswer",
    "ToolCallEvent": "ToolCallDraft",
    "ToolResultEvent": "ToolResultDraft",
}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
