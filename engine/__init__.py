"""toolledger's engine: what makes tool calls happen, and records every step.

The public face::

    from engine import Session, tool, Annotations, ToolResult, text, approve_all
    from engine.models import FauxModel, faux_tool_call, faux_text
    from events import JsonlStore, MemoryStore
"""

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
    ApprovalDecision,
    ApprovalRequest,
    approve_all,
    deny_all,
    terminal_approver,
)
from .context import CallOutcome, ToolContext
from .handlers import Block, ResultPatch, Rewrite, ToolCallEvent, ToolResultEvent
from .lifecycle import LifecycleError
from .limits import Limits
from .policy import PolicyRules, needs_approval
from .reducers import CallView, LogInconsistency, Projection, fold
from .schemas import SchemaError
from .session import PromptResult, Session
from .tools import ToolCall, ToolSpec, tool

__all__ = [
    "LATER",
    "Annotations",
    "ApprovalDecision",
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
    "ToolCallEvent",
    "ToolContext",
    "ToolResult",
    "ToolResultEvent",
    "ToolSpec",
    "approve_all",
    "deny_all",
    "fold",
    "needs_approval",
    "terminal_approver",
    "text",
    "tool",
]
