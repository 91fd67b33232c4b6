"""An adapter for Anthropic's Messages API, over the official ``anthropic`` SDK (extra
``anthropic``).

:class:`AnthropicModel` takes the host's ``AsyncAnthropic`` client, injected (its key, base
URL, retries and timeouts are the host's). The SDK is built on anyio, so it runs under trio;
open the client with ``async with``, which closes it.

What it does (the mapping tables are in docs/models.md):

- sends the system prompt as ``system``, the transcript as alternating user and assistant
  messages (a batch's results, and a user message that follows them, share one user
  message: ``tool_result`` blocks first, ``is_error`` set for an error result), the declared
  tools as ``{name, description, input_schema}``, and ``max_tokens`` (required by the API);
- gives each tool a name the API takes (:mod:`engine.models.toolnames`: ``notes.read`` is
  sent as ``notes_read``) and reads the names in the reply back;
- reads the reply field by field (:mod:`engine.models.replies`): a reply that is not in the
  API's format fails the turn with a :class:`~engine.models.ModelError` naming the field;
- keeps a message whose blocks it does not interpret (thinking, redacted thinking, text with
  citations, server tools) as provider content, sent back unchanged on the next turn;
- streams when asked (``stream=True``): text and ``input_json`` deltas go to the session's
  subscribers; the message is returned whole at the end;
- turns the SDK's errors, and a ``refusal`` stop, into :class:`~engine.models.ModelError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.modelturns import ProviderContent, Usage
from events.types import AssistantMessage, UserMessage

from ..core.views import ToolResultEntry
from ._sdk import dump, import_sdk, provider_error
from .formats import anthropic_tool, result_blocks
from .protocol import ModelError, ModelInfo, ModelMessage, ModelRequest
from .replies import Part, Streamed, reading, sendable
from .toolnames import ToolNames

anthropic = import_sdk("anthropic")

__all__ = ["AnthropicModel", "anthropic_messages"]

API = "anthropic.messages"
FORMAT = "Messages"


class AnthropicModel:
    """A model behind Anthropic's Messages API.

    ``max_tokens`` is sent with every request (the API requires it); ``settings`` are sent
    too (``temperature``, ``thinking``, ...) and recorded. Example::

        async with anthropic.AsyncAnthropic() as client:
            model = AnthropicModel(client, "claude-sonnet-4-5", max_tokens=2048)
    """

    def __init__(self, client: Any, model: str, *, max_tokens: int = 4096,
                 stream: bool = False, settings: Mapping[str, Any] | None = None) -> None:
        self._client = client
        self._model = model
        self._stream = stream
        self._settings = {"max_tokens": max_tokens, **(settings or {})}
        #: What the session records about this model with each request.
        self.info = ModelInfo(provider="anthropic", model=model, api="messages",
                              settings=self._settings, stream=stream)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next assistant message (see the module docstring)."""
        names = ToolNames.of(request)
        params: dict[str, Any] = {"model": self._model,
                                  "messages": anthropic_messages(request, names),
                                  **self._settings}
        if request.system is not None:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [anthropic_tool(tool, name=names.sent(tool.name))
                               for tool in request.tools]
        try:
            if not self._stream:
                answer = await self._client.messages.with_raw_response.create(**params)
                with reading(FORMAT, anthropic.AnthropicError):
                    return anthropic_message(await answer.parse(), names)
            return await self._streamed(params, request, names)
        except anthropic.AnthropicError as exc:
            raise provider_error(exc, anthropic) from exc

    async def _streamed(self, params: dict[str, Any], request: ModelRequest,
                        names: ToolNames) -> ModelMessage:
        streamed = Streamed(request, names)  # a call is keyed by its block's index
        async with self._client.messages.stream(**params) as stream:
            with reading(FORMAT, anthropic.AnthropicError):
                async for event in stream:
                    if event.type == "content_block_start" and \
                            event.content_block.type == "tool_use":
                        block = event.content_block
                        streamed.call(event.index, block.id, block.name)
                    elif event.type == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            streamed.text(delta.text)
                        elif delta.type == "input_json_delta":
                            streamed.arguments(event.index, delta.partial_json)
                return anthropic_message(await stream.get_final_message(), names)


def anthropic_messages(request: ModelRequest,
                       names: ToolNames | None = None) -> list[dict[str, Any]]:
    """The transcript as Messages API messages (the system prompt goes as ``system``;
    ``names``: the tools' names at the provider, by default :meth:`ToolNames.of` the
    request)."""
    names = ToolNames.of(request) if names is None else names
    messages: list[dict[str, Any]] = []

    def user(blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": "user", "content": blocks})

    for entry in request.transcript:
        if isinstance(entry, UserMessage):
            user([{"type": "text", "text": entry.text}])
        elif isinstance(entry, AssistantMessage):
            kept = entry.provider_content
            if kept is not None and kept.api == API:
                messages.append({"role": "assistant", "content": list(kept.items)})
                continue
            blocks: list[dict[str, Any]] = [{"type": "text", "text": entry.text}] \
                if entry.text else []
            blocks.extend({"type": "tool_use", "id": call.id, "name": names.sent(call.name),
                           "input": call.arguments if isinstance(call.arguments, dict) else {}}
                          for call in entry.tool_calls)
            messages.append({"role": "assistant", "content": blocks})
        elif isinstance(entry, ToolResultEntry):
            user([_tool_result(entry)])
    return messages


def _tool_result(entry: ToolResultEntry) -> dict[str, Any]:
    content = [{"type": "text", "text": data} if kind == "text" else
               {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
               for kind, data, mime in result_blocks(entry.result)]
    block: dict[str, Any] = {"type": "tool_result",
                             "tool_use_id": entry.model_call_id or entry.call_id,
                             "content": content}
    if entry.result.is_error:
        block["is_error"] = True
    return block


def anthropic_message(message: Any, names: ToolNames | None = None) -> ModelMessage:
    """A Messages API response as an assistant message (``names``: the request's tool names,
    to read the calls' back); a ``ModelError`` naming the field if it is not one."""
    names = ToolNames(()) if names is None else names
    reply = Part.of(message, FORMAT)
    stop_reason = reply.optional_text("stop_reason")
    if stop_reason == "refusal":
        raise ModelError("refused", "the model refused to answer (stop reason 'refusal')",
                         response_id=reply.response_id)
    texts: list[str] = []
    calls = []
    plain = True  # nothing in it the adapter does not interpret
    content = reply.items("content")
    for block in content:
        kind = block.text("type")
        if kind == "text":
            texts.append(block.text("text"))
            plain = plain and not block.get("citations")
        elif kind == "tool_use":
            calls.append(names.call(block.text("id"), block.text("name"), block.get("input")))
        else:
            plain = False
    usage = reply.optional_part("usage")
    return sendable(ModelMessage(
        text="".join(texts), tool_calls=calls, stop_reason=stop_reason or "stop",
        model=reply.optional_text("model"), response_id=reply.optional_text("id"),
        usage=None if usage is None else _usage(usage),
        provider_content=None if plain else ProviderContent(
            api=API, items=[dump(block.value) for block in content]),
    ), reply)


def _usage(usage: Part) -> Usage:
    """The Messages API counts cached input apart: input tokens are its three counts."""
    given = usage.count("input_tokens")
    read = usage.count("cache_read_input_tokens") or 0
    written = usage.count("cache_creation_input_tokens") or 0
    return Usage(input_tokens=None if given is None else given + read + written,
                 output_tokens=usage.count("output_tokens"), cached_tokens=read)
