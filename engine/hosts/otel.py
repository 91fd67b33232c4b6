"""OpenTelemetry spans from a session's records, by the GenAI semantic conventions.

The spans are made from the log, not from hooks in the engine: :data:`SPAN_RULES` (in
:mod:`engine.hosts.spanrules`) is one table from record types to what they do to a span (start it,
add an event, end it), and the same :class:`SpanBuilder` feeds on a live session's records (:func:`trace_session`) or on a
log read after the fact (``toolledger export-otel``). Every record carries its time, so a
span starts and ends at the times its records were made, live or not, and a session that ran
before tracing was switched on can still be traced.

The spans (docs/hosts.md, "Tracing"):

- ``invoke_agent`` (or ``invoke_agent {agent_name}``), one per prompt: from the user's
  message to the assistant's message without tool calls. A prompt that paused for approval
  or stopped at ``max_turns`` ends at the record before the next user message, or the last
  record when the session closes.
- ``execute_tool {name}``, one per call (plain ``execute_tool`` for a name no tool was
  registered under, without content capture), a child of its prompt's span, or of its parent
  call's span for a nested call: from its request to its terminal record, with the gating
  steps (rewritten, policy, approval asked and answered, body started) as span events.
  ``error.type`` is set explicitly: the failure's kind (``timeout``, ``interrupted``, ...),
  or the exception's type for a body that raised, ``cancelled``, ``blocked``, ``denied``, or
  ``tool_error`` for a result the tool marked as an error; the status is then ``ERROR``. A
  result handler that raised is a ``result_handler_failed`` event.
  (A span that trio's ``Cancelled`` passed through would have neither: it is a
  ``BaseException``, which ``use_span`` does not record. The records say what happened.)
- ``chat {model}`` per model turn, a child of its prompt's span (``CLIENT``: the model is
  asked over the network): from the request (``model_requested``) to its answer
  (``model_responded``) or failure (``model_failed``, whose ``kind`` is the ``error.type``),
  with the request's model, provider and settings, and the answer's model, id, finish reason
  and token usage.

Text that others wrote goes on a span only with ``capture_content=True``: the arguments and
the result (``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``, as JSON text), the
message of a failure, a block's or a refusal's reason, a provider's error, a result handler's
exception, the name of a tool the model made up. By default an error's status says one of our
own fixed sentences (:mod:`engine.hosts.spantext`) beside its ``error.type``: spans leave the
process, and that text may hold anything a tool read.

The attribute names are written out (:mod:`engine.hosts.genai`), not imported from
``opentelemetry-semantic-conventions``: the GenAI conventions are still "Development" and that
package marks its incubating names deprecated as they move. Followed: the GenAI conventions as
published with OpenTelemetry semantic conventions v1.41 (:data:`SEMCONV_VERSION`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine, Iterable, Sequence
from typing import Any, Protocol

from events.types import Record

try:
    from opentelemetry import trace
    from opentelemetry.context import get_current
    from opentelemetry.trace import Tracer
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ImportError("engine.hosts.otel needs OpenTelemetry's API: install toolledger[otel] "
                      "(opentelemetry-api)") from exc

from .genai import SEMCONV_VERSION
from .spanrules import SCOPE, SPAN_RULES, SpanBuilder

__all__ = ["SCOPE", "SEMCONV_VERSION", "SPAN_RULES", "SpanBuilder", "spans_from_records",
           "trace_session"]


def spans_from_records(records: Iterable[Record], tracer: Tracer, **options: Any) -> None:
    """Make the spans of a recorded session (``records`` in order), each with its recorded
    start and end times; spans still open at the end end at the last record's time."""
    builder = SpanBuilder(tracer, **options)
    for record in records:
        builder.feed(record)
    builder.close()


class _Followed(Protocol):
    @property
    def records(self) -> Any: ...

    def follow(self, after: int = 0) -> AsyncIterator[Record]: ...


def trace_session(session: _Followed, *, tracer_provider: Any = None,
                  capture_content: bool = False, agent_name: str | None = None,
                  provider_name: str | None = None) -> Coroutine[Any, Any, None]:
    """Emit the spans of ``session`` (an :class:`engine.Session` or an
    :class:`engine.hosts.aio.Session`) as its records are made, until it closes::

        async with trio.open_nursery() as nursery:
            async with Session.open(store, model=model, tools=tools) as session:
                nursery.start_soon(trace_session, session)
                await session.prompt("...")

    Run it in a task that outlives the session's block (a trio nursery around the block,
    or an asyncio task): it ends when the session closes, ending the spans still open.
    The spans are children of the OpenTelemetry context current where it is called (a web
    request's span, say). It traces the records made from the moment it is called (not
    awaited: ``start_soon`` and ``create_task`` call it at once); records made before make
    no span, except that a prompt or call still open then is traced from its recorded
    start.
    """
    tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider,
                              schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
    builder = SpanBuilder(tracer, capture_content=capture_content, agent_name=agent_name,
                          provider_name=provider_name, context=get_current())
    history = session.records
    return _trace(session, builder, history)


async def _trace(session: _Followed, builder: SpanBuilder, history: Sequence[Record]) -> None:
    for record in history:
        builder.feed(record, emit=False)
    try:
        async for record in session.follow(len(history)):
            builder.feed(record)
    finally:
        builder.close()
