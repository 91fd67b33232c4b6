"""The rules that turn a session's records into OpenTelemetry spans: :data:`SPAN_RULES`,
one table from record types to what they do to a span (start it, add an event, end it), and
the :class:`SpanBuilder` they drive. :mod:`engine.hosts.otel` feeds it a live session's records or a
log's; its docstring says which spans there are and what they carry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from events.codec import converter
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    PolicyDecided,
    Record,
    ResultHandlerFailed,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolRegistered,
    UserMessage,
)

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError("engine.hosts.spanrules needs OpenTelemetry's API: install toolledger[otel] "
                      "(opentelemetry-api)") from exc

from ..core.nested import canonical
from .genai import (
    AGENT_NAME,
    CALL_ID,
    CONVERSATION_ID,
    ERROR_TYPE,
    OPERATION_NAME,
    PROVIDER_NAME,
    REQUEST_MODEL,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    TOOL_CALL_ARGUMENTS,
    TOOL_CALL_ID,
    TOOL_CALL_RESULT,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_TYPE,
    request_attributes,
    usage_attributes,
)
from .spantext import exception_attributes, status_description, tool_name

__all__ = ["SCOPE", "SPAN_RULES", "SpanBuilder"]

#: The instrumentation scope the spans are made under.
SCOPE = "toolledger"

def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _json_text(value: Any) -> str:
    return canonical(value)


class _Pending:
    """A span as the records describe it so far, made an OpenTelemetry span on demand."""

    def __init__(self, name: str, start: int, parent: str | None,
                 attributes: dict[str, Any], kind: SpanKind) -> None:
        self.name = name
        self.start = start
        self.parent = parent
        self.attributes = attributes
        self.kind = kind
        self.events: list[tuple[str, dict[str, Any], int]] = []
        self.span: Span | None = None


class SpanBuilder:
    """Turns a session's records, in order, into spans (:data:`SPAN_RULES`).

    ``emit=False`` in :meth:`feed` reads a record only to know what is open (the history
    before live tracing began): a span that starts and ends there is never made; one still
    open when emitting begins is made then, with its recorded start time and events.
    """

    def __init__(self, tracer: Tracer, *, capture_content: bool = False,
                 agent_name: str | None = None, provider_name: str | None = None,
                 context: Context | None = None) -> None:
        self.tracer = tracer
        self.capture_content = capture_content
        self.agent_name = agent_name
        self.provider_name = provider_name
        self.context = context
        self.emitting = True
        self.prompt: str | None = None  # the key of the open invoke_agent span
        self.prompts = 0
        self.last_time = 0
        self.descriptions: dict[str, str] = {}  # by the name of every tool registered
        self.open: dict[str, _Pending] = {}

    def feed(self, record: Record, *, emit: bool = True) -> None:
        """Apply ``record`` to the spans."""
        self.emitting = emit
        rule = SPAN_RULES.get(type(record.event))
        if rule is not None:
            rule(self, record)
        self.last_time = _ns(record.time)

    def close(self) -> None:
        """End every span still open (the session closed), at the last record's time."""
        for key in list(self.open):
            self.end(key, self.last_time)

    # -- what the rules do ------------------------------------------------------------------

    def start(self, key: str, name: str, record: Record, parent: str | None,
              attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> None:
        """Open the span ``key``, a child of ``parent`` (a key) or of the builder's context."""
        self.open[key] = _Pending(name, _ns(record.time), parent, attributes, kind)
        if self.emitting:
            self._made(key)

    def event(self, key: str | None, name: str, record: Record,
              attributes: dict[str, Any] | None = None) -> None:
        """Add a span event to the open span ``key``."""
        pending = self.open.get(key) if key is not None else None
        if pending is None:
            return
        at = _ns(record.time)
        attributes = attributes or {}
        if pending.span is not None:
            pending.span.add_event(name, attributes, timestamp=at)
        else:
            pending.events.append((name, attributes, at))

    def set(self, key: str, attributes: dict[str, Any]) -> None:
        """Set attributes on the open span ``key``."""
        pending = self.open.get(key)
        if pending is None:
            return
        pending.attributes.update(attributes)
        if pending.span is not None:
            pending.span.set_attributes(attributes)

    def set_default(self, key: str, name: str, value: Any) -> None:
        """Set the attribute ``name`` on the open span ``key`` unless it has it already."""
        pending = self.open.get(key)
        if pending is not None and name not in pending.attributes:
            self.set(key, {name: value})

    def end(self, key: str, at: int, error_type: str | None = None,
            description: str | None = None) -> None:
        """End the span ``key`` at ``at`` (ns), as an error of ``error_type`` if given."""
        pending = self.open.pop(key, None)
        if pending is None:
            return
        if pending.span is None and not self.emitting:
            return  # began and ended before tracing did
        span = pending.span if pending.span is not None else self._made(key, pending)
        if error_type is not None:
            span.set_attribute(ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, description))
        span.end(end_time=at)

    def _made(self, key: str, pending: _Pending | None = None) -> Span:
        pending = pending if pending is not None else self.open[key]
        if pending.span is not None:
            return pending.span
        context = self.context
        if pending.parent is not None and (parent := self.open.get(pending.parent)):
            context = trace.set_span_in_context(self._made(pending.parent, parent), context)
        span = self.tracer.start_span(pending.name, context=context, kind=pending.kind,
                                      attributes=pending.attributes, start_time=pending.start)
        for name, attributes, at in pending.events:
            span.add_event(name, attributes, timestamp=at)
        pending.events.clear()
        pending.span = span
        return span


# -- the table: what each record does to the spans ----------------------------------------


def _user_message(builder: SpanBuilder, record: Record) -> None:
    if builder.prompt is not None:  # the last prompt paused or stopped at max_turns
        builder.end(builder.prompt, builder.last_time)
    builder.prompts += 1
    builder.prompt = f"prompt {builder.prompts}"
    attributes: dict[str, Any] = {OPERATION_NAME: "invoke_agent",
                                  CONVERSATION_ID: record.session_id}
    if builder.agent_name is not None:
        attributes[AGENT_NAME] = builder.agent_name
    if builder.provider_name is not None:
        attributes[PROVIDER_NAME] = builder.provider_name
    name = f"invoke_agent {builder.agent_name}" if builder.agent_name else "invoke_agent"
    builder.start(builder.prompt, name, record, None, attributes)


def _assistant_message(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, AssistantMessage)
    if not event.tool_calls and builder.prompt is not None:
        builder.end(builder.prompt, _ns(record.time))
        builder.prompt = None


def _model_requested(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ModelRequested)
    attributes: dict[str, Any] = {OPERATION_NAME: "chat", PROVIDER_NAME: event.provider,
                                  REQUEST_MODEL: event.model,
                                  CONVERSATION_ID: record.session_id}
    attributes.update(request_attributes(event.settings))
    if builder.prompt is not None and builder.provider_name is None:
        # the prompt's span names the provider its turns asked (first turn's), unless given
        builder.set_default(builder.prompt, PROVIDER_NAME, event.provider)
    builder.start(f"turn {event.turn}", f"chat {event.model}", record, builder.prompt,
                  attributes, SpanKind.CLIENT)


def _model_responded(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ModelResponded)
    attributes: dict[str, Any] = {RESPONSE_FINISH_REASONS: [event.stop_reason]}
    if event.model is not None:
        attributes[RESPONSE_MODEL] = event.model
    if event.response_id is not None:
        attributes[RESPONSE_ID] = event.response_id
    if event.usage is not None:
        attributes.update(usage_attributes(event.usage))
    builder.set(f"turn {event.turn}", attributes)
    builder.end(f"turn {event.turn}", _ns(record.time))


def _model_failed(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ModelFailed)
    if event.response_id is not None:
        builder.set(f"turn {event.turn}", {RESPONSE_ID: event.response_id})
    builder.end(f"turn {event.turn}", _ns(record.time), event.kind,
                status_description(event, builder.capture_content))


def _tool_registered(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ToolRegistered)
    builder.descriptions[event.spec.name] = event.spec.description


def _call_requested(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ToolCallRequested)
    # the provider's id when the model asked, so the span pairs with the model's call; the
    # engine's id always, which a host or nested call (no provider id) has too
    attributes: dict[str, Any] = {OPERATION_NAME: "execute_tool",
                                  TOOL_CALL_ID: event.model_call_id or event.call_id,
                                  CALL_ID: event.call_id, TOOL_TYPE: "function"}
    name = tool_name(event.name, event.name in builder.descriptions, builder.capture_content)
    if name is not None:
        attributes[TOOL_NAME] = name
    if description := builder.descriptions.get(event.name):
        attributes[TOOL_DESCRIPTION] = description
    if builder.capture_content:
        attributes[TOOL_CALL_ARGUMENTS] = _json_text(event.arguments)
    parent = f"call {event.parent_id}" if event.parent_id is not None else builder.prompt
    builder.start(f"call {event.call_id}", "execute_tool" if name is None else
                  f"execute_tool {name}", record, parent, attributes)


def _call_rewritten(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ToolCallRewritten)
    builder.event(f"call {event.call_id}", "rewritten", record, {"by": event.by})
    if builder.capture_content:
        builder.set(f"call {event.call_id}", {TOOL_CALL_ARGUMENTS: _json_text(event.arguments)})


def _policy_decided(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, PolicyDecided)
    builder.event(f"call {event.call_id}", "policy_decided", record,
                  {"decision": event.decision})


def _approval_requested(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ApprovalRequested)
    builder.event(f"call {event.call_id}", "approval_requested", record)


def _approval_resolved(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ApprovalResolved)
    builder.event(f"call {event.call_id}", "approval_resolved", record,
                  {"granted": event.granted, "scope": event.scope})


def _execution_started(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ToolExecutionStarted)
    builder.event(f"call {event.call_id}", "execution_started", record)


def _result_handler_failed(builder: SpanBuilder, record: Record) -> None:
    event = record.event
    assert isinstance(event, ResultHandlerFailed)
    builder.event(f"call {event.call_id}", "result_handler_failed", record,
                  {"handler": event.handler,
                   **exception_attributes(event.error, builder.capture_content)})


def _ended(error_type: Callable[[Any], str | None]) -> Callable[[SpanBuilder, Record], None]:
    """The rule of a terminal event: end the call's span, an error of ``error_type(event)``."""

    def rule(builder: SpanBuilder, record: Record) -> None:
        event = record.event
        key = f"call {event.call_id}"  # type: ignore[union-attr]
        result = getattr(event, "result", None)
        if builder.capture_content and result is not None:
            builder.set(key, {TOOL_CALL_RESULT: _json_text(_result_json(result))})
        kind = error_type(event)
        builder.end(key, _ns(record.time), kind, None if kind is None else
                    status_description(event, builder.capture_content))

    return rule


def _result_json(result: Any) -> Any:
    return converter.unstructure(result)  # the codec knows how values look as JSON


def _failed_type(event: ToolCallFailed) -> str:
    if event.kind == "raised" and event.error is not None:
        return event.error.type  # the exception's name, as the conventions suggest
    return event.kind


#: What each record type does to the spans: the one table, live and from a log. Record types
#: not listed (session start, active tools, progress, ...) make no span.
SPAN_RULES: dict[type[Any], Callable[[SpanBuilder, Record], None]] = {
    UserMessage: _user_message,
    AssistantMessage: _assistant_message,
    ModelRequested: _model_requested,
    ModelResponded: _model_responded,
    ModelFailed: _model_failed,
    ToolRegistered: _tool_registered,
    ToolCallRequested: _call_requested,
    ToolCallRewritten: _call_rewritten,
    PolicyDecided: _policy_decided,
    ApprovalRequested: _approval_requested,
    ApprovalResolved: _approval_resolved,
    ToolExecutionStarted: _execution_started,
    ResultHandlerFailed: _result_handler_failed,
    ToolCallCompleted: _ended(lambda event: "tool_error" if event.result.is_error else None),
    ToolCallFailed: _ended(_failed_type),
    ToolCallBlocked: _ended(lambda event: "blocked"),
    ToolCallDenied: _ended(lambda event: "denied"),
    ToolCallCancelled: _ended(lambda event: "cancelled"),
}
