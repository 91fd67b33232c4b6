"""toolledger's engine: what makes tool calls happen, and records every step.

The public face::

    from engine import Session, tool, Annotations, Param, ToolResult, text, approve_all
    from engine.models import FauxModel, faux_tool_call, faux_text
    from events import JsonlStore, MemoryStore
"""

from typing import Any

from events.errors import (
    LogError,
    SessionError,
    SessionInUse,
    SessionNotFound,
    ToolledgerError,
)
from events.renamed import moved_modules, renamed_attribute
from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ModelView,
    ResourceLink,
    TextContent,
    ToolResult,
    text,
)
from events.types import Annotations

from .core.approvals import (
    LATER,
    ApprovalAnswer,
    ApprovalRequest,
    approve_all,
    at_once,
    deny_all,
)
from .core.errors import (
    AlreadyRunning,
    ApprovalNotPending,
    CallError,
    CallNotFound,
    CodeModeUnavailable,
    InvalidAnswer,
    NoModel,
    ProgramStateRefused,
    QuestionNotPending,
    SessionBroken,
    SessionClosed,
    SessionPaused,
    ToolSignatureError,
)
from .core.handlers import Block, ResultPatch, Rewrite, ToolCallDraft, ToolResultDraft
from .core.lifecycle import LifecycleError
from .core.limits import Limits
from .core.policy import PolicyRules, needs_approval
from .core.questions import Answer, Question, decline_all
from .core.reducers import CallView, LogInconsistency, Projection, fold
from .core.schemas.checking import SchemaError
from .core.readoutput import read_output
from .core.toolcontext import CallOutcome, ToolContext
from .core.tools import ToolCall, ToolSpec, tool
from .core.typed import Param
from .present.terminal import terminal_approver
from .present.terminalform import terminal_asker
from .runtime.session import PromptResult, Session

__all__ = [
    "LATER",
    "AlreadyRunning",
    "Annotations",
    "Answer",
    "ApprovalAnswer",
    "ApprovalNotPending",
    "ApprovalRequest",
    "AudioContent",
    "Block",
    "CallError",
    "CallNotFound",
    "CodeModeUnavailable",
    "ProgramStateRefused",
    "CallOutcome",
    "CallView",
    "EmbeddedResource",
    "ImageContent",
    "InvalidAnswer",
    "LifecycleError",
    "Limits",
    "LogError",
    "ModelView",
    "LogInconsistency",
    "NoModel",
    "Param",
    "PolicyRules",
    "Projection",
    "PromptResult",
    "Question",
    "QuestionNotPending",
    "ResourceLink",
    "ResultPatch",
    "Rewrite",
    "SchemaError",
    "Session",
    "SessionBroken",
    "SessionClosed",
    "SessionError",
    "SessionInUse",
    "SessionNotFound",
    "SessionPaused",
    "TextContent",
    "ToolCall",
    "ToolCallDraft",
    "ToolContext",
    "ToolResult",
    "ToolResultDraft",
    "ToolSignatureError",
    "ToolSpec",
    "ToolledgerError",
    "approve_all",
    "at_once",
    "decline_all",
    "deny_all",
    "fold",
    "needs_approval",
    "read_output",
    "terminal_approver",
    "terminal_asker",
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


#: Modules that moved when the engine was laid out in layers (docs/architecture.md): the old
#: path still imports the module, with a warning naming the new one.
MOVED_MODULES = {
    "engine.aio": "engine.hosts.aio",
    "engine.approvals": "engine.core.approvals",
    "engine.asking": "engine.runtime.asking",
    "engine.batch": "engine.runtime.batch",
    "engine.callids": "engine.core.callids",
    "engine.calls": "engine.runtime.calls",
    "engine.console": "engine.present.console",
    "engine.context": "engine.runtime.context",
    "engine.controls": "engine.runtime.session",
    "engine.deltas": "engine.runtime.deltas",
    "engine.endings": "engine.runtime.endings",
    "engine.environment": "engine.core.environment",
    "engine.export": "engine.present.export",
    "engine.fork": "engine.runtime.fork",
    "engine.gate": "engine.runtime.gate",
    "engine.genai": "engine.hosts.genai",
    "engine.guest": "engine.hosts.guest",
    "engine.handlers": "engine.core.handlers",
    "engine.history": "engine.core.history",
    "engine.hostcalls": "engine.runtime.hostcalls",
    "engine.inflight": "engine.runtime.inflight",
    "engine.jsonvalues": "engine.core.jsonvalues",
    "engine.lifecycle": "engine.core.lifecycle",
    "engine.limits": "engine.core.limits",
    "engine.nested": "engine.core.nested",
    "engine.otel": "engine.hosts.otel",
    "engine.outputs": "engine.core.outputs",
    "engine.patterns": "engine.core.schemas.patterns",
    "engine.policy": "engine.core.policy",
    "engine.projection": "engine.core.reducers",
    "engine.recorder": "engine.runtime.recorder",
    "engine.reducers": "engine.core.reducers",
    "engine.refusals": "engine.core.refusals",
    "engine.registry": "engine.core.registry",
    "engine.renamed": "events.renamed",
    "engine.render": "engine.present.render",
    "engine.schemadialects": "engine.core.schemas.dialects",
    "engine.schemarefs": "engine.core.schemas.refs",
    "engine.schemas": "engine.core.schemas.checking",
    "engine.schemas2020": "engine.core.schemas.draft2020",
    "engine.search": "engine.core.search",
    "engine.session": "engine.runtime.session",
    "engine.spanrules": "engine.hosts.spanrules",
    "engine.spantext": "engine.hosts.spantext",
    "engine.tools": "engine.core.tools",
    "engine.views": "engine.core.views",
    "engine.visible": "engine.core.visible",
    # one object, one file: a class's halves joined into the module of the whole
    "engine.core.projection": "engine.core.reducers",
    "engine.runtime.controls": "engine.runtime.session",
}
moved_modules(MOVED_MODULES)
