"""The events of a session outside its calls: its start, its tools, the messages.

A session starts (:class:`SessionStarted`, with the settings it was opened with), learns its
tools (:class:`ToolRegistered`, with a :class:`ToolSnapshot` of each), has its active set
changed by the host or a tool, and exchanges messages with the model (:class:`UserMessage`,
:class:`AssistantMessage`). The values these carry (a tool's annotations and where it runs, a
tool call as the model wrote it, the session's limits) are here too. Re-exported by
:mod:`events.types`, the whole catalogue; import them from there.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .fast.fastinit import fast_init
from .modelturns import ProviderContent
from .results import ModelView

__all__ = [
    "ActiveToolsSet",
    "Annotations",
    "AssistantMessage",
    "ExecutionMode",
    "Exposure",
    "ModelToolCall",
    "SessionSettings",
    "SessionStarted",
    "ToolRegistered",
    "ToolSnapshot",
    "ToolSource",
    "ToolsActivated",
    "UserMessage",
]

Exposure = Literal["direct", "model-only", "codemode", "deferred", "hidden"]
ExecutionMode = Literal["parallel", "sequential"]


@attrs.frozen(kw_only=True, cache_hash=True)  # the policy looks decisions up by it
class Annotations:
    """MCP's hints about a tool's behaviour; ``None`` means "not declared".

    Undeclared hints take MCP's defaults: not read-only, destructive, not idempotent,
    open-world. So a tool that declares nothing is treated as dangerous. These are hints from
    the tool's author: nothing verifies them. They inform the approval policy; they are not a
    sandbox.
    """

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@attrs.frozen(kw_only=True)
class ToolSource:
    """Where a tool's code runs when it is not in this process: a tool of an MCP server
    mounted into the session (:mod:`engine.mcp`).

    ``server`` and ``version`` are the server's own name and version from its handshake (the
    host's name for it when the server gives none); ``tool`` is the tool's name on that server,
    which the session may know under a prefixed name. Recorded with the tool's registration, so
    every call of the tool names the server that answered it, and a server that comes back as
    another version registers the tool again.

    ``hints`` are the annotations the server declared for the tool, as it declared them, and
    ``hints_trusted`` says whether they are the tool's :attr:`ToolSnapshot.annotations` (the
    host mounted the server with ``trust_hints=True``): if not, the policy reads MCP's
    defaults, or the host's own hints, whatever the server said. Both are ``None`` in a log
    written before they were recorded."""

    server: str
    version: str | None = None
    tool: str
    hints: Annotations | None = None
    hints_trusted: bool | None = None


@attrs.frozen(kw_only=True)
class ToolSnapshot:
    """Everything about a tool except its code, as registered: what replay needs to judge it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: Annotations = Annotations()
    exposure: Exposure = "direct"
    execution_mode: ExecutionMode = "parallel"
    timeout: float | None = None
    #: a mounted MCP server's tool: which server, and its name there (None: a local tool)
    source: ToolSource | None = None
    #: how much of the tool's result the model reads (None: the session's, or all of it)
    model_view: ModelView | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ModelToolCall:
    """One tool call as the model wrote it; ``id`` is the model's, used only for pairing.

    ``name`` is the tool's. ``model_name`` is the name the model wrote, when its adapter gave
    the tool another name at the provider (OpenAI and Anthropic take only
    ``[a-zA-Z0-9_-]{1,64}``: docs/models.md, "Tool names"); ``None`` when they are the same.
    """

    id: str
    name: str
    arguments: Any
    model_name: str | None = None


@attrs.frozen(kw_only=True)
class SessionSettings:
    """What a session was opened with that decides what it does: its limits. A replay opens
    the session again with them; nothing reads them out of a message.

    ``max_artifact_bytes`` (the largest result kept as an artifact) and ``model_view`` (how
    much of a result the model reads) are ``None`` in logs written before they were recorded:
    those sessions kept no artifacts and cut nothing."""

    max_turns: int
    max_depth: int
    max_argument_bytes: int
    max_result_bytes: int
    max_artifact_bytes: int | None = None
    model_view: ModelView | None = None


# -- the events ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionStarted:
    """The first record of every session: its metadata, and the settings it was opened with
    (``None`` in logs written before they were recorded)."""

    metadata: dict[str, Any] = attrs.field(factory=dict)
    settings: SessionSettings | None = None


@attrs.frozen(kw_only=True)
class ToolRegistered:
    """A tool became known to the session, with its full spec snapshot."""

    spec: ToolSnapshot


@attrs.frozen(kw_only=True)
class ActiveToolsSet:
    """``set_active_tools`` replaced the active set. (Logs written before hidden tools could
    be activated never hold a hidden name here.)"""

    names: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ToolsActivated:
    """Tools joined the active set, and none left it: by the host (``session.activate``;
    ``call_id`` is ``None``) or by a running tool (``ctx.activate``, the search tool's way;
    ``call_id`` is that call's). They are declared to the model from its next request on."""

    names: tuple[str, ...]
    call_id: str | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class UserMessage:
    """The user's prompt."""

    text: str


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class AssistantMessage:
    """What the model answered in ``turn`` (1-based): text, tool calls and why it stopped.

    ``provider_content``: the message as its provider gave it, when it holds blocks toolledger
    does not interpret (reasoning, thinking, citations), for the adapter to send back
    unchanged (:class:`~events.modelturns.ProviderContent`)."""

    turn: int
    text: str = ""
    tool_calls: tuple[ModelToolCall, ...] = ()
    stop_reason: str = "stop"
    provider_content: ProviderContent | None = None
