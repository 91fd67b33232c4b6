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
- keeps a message whose blocks it does not interpret (thinking, redacted thinking, text with
  citations, server tools) as provider content, sent back unchanged on the next turn;
- streams when asked (``stream=True``): text and ``input_json`` deltas go to the session's
  subscribers; the message is returned whole at the end;
- turns the SDK's errors, and a ``refusal`` stop, into :class:`~engine.models.ModelError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.models import ProviderContent, Usage
from events.types import AssistantMessage, ModelToolCall, UserMessage

from ..views import ToolResultEntry
from ._sdk import dump, import_sdk, provider_error
from .formats import anthropic_tool, result_blocks
from .protocol import ModelDelta, ModelError, ModelInfo, ModelMessage, ModelRequest

anthropic = import_sdk("anthropic")

__all__ = ["AnthropicModel", "anthropic_messages"]

API = "anthropic.messages"


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
        params: dict[str, Any] = {"model": self._model, "messages": anthropic_messages(request),
                                  **self._settings}
        if request.system is not None:
            params["system"] = request.system
        if request.tools:
            params["tools"] = [anthropic_tool(tool) for tool in request.tools]
        try:
            if not self._stream:
                return anthropic_message(await self._client.messages.create(**params))
            return anthropic_message(await self._streamed(params, request))
        except anthropic.AnthropicError as exc:
            error = provider_error(exc, anthropic)
            if error is None:
                raise
            raise error from exc

    async def _streamed(self, params: dict[str, Any], request: ModelRequest) -> Any:
        calls: dict[int, tuple[int, str, str]] = {}  # block index -> call
        async with self._client.messages.stream(**params) as stream:
            async for event in stream:
                if event.type == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    calls[event.index] = (len(calls), block.id, block.name)
                elif event.type == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        request.on_delta(ModelDelta(turn=request.turn, kind="text",
                                                    text=delta.text))
                    elif delta.type == "input_json_delta" and event.index in calls:
                        index, call_id, name = calls[event.index]
                        request.on_delta(ModelDelta(turn=request.turn, kind="arguments",
                                                    text=delta.partial_json, index=index,
                                                    call_id=call_id, name=name))
            return await stream.get_final_message()


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The transcript as Messages API messages (the system prompt goes as ``system``)."""
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
            blocks.extend({"type": "tool_use", "id": call.id, "name": call.name,
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


def anthropic_message(message: Any) -> ModelMessage:
    """A Messages API response as an assistant message."""
    if message.stop_reason == "refusal":
        raise ModelError("refused", "the model refused to answer (stop reason 'refusal')",
                         response_id=message.id)
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    plain = True  # nothing in it the adapter does not interpret
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
            plain = plain and not getattr(block, "citations", None)
        elif block.type == "tool_use":
            calls.append(ModelToolCall(id=block.id, name=block.name, arguments=block.input))
        else:
            plain = False
    usage = message.usage
    read = getattr(usage, "cache_read_input_tokens", None) or 0
    written = getattr(usage, "cache_creation_input_tokens", None) or 0
    return ModelMessage(
        text="".join(texts), tool_calls=tuple(calls), stop_reason=message.stop_reason or "stop",
        model=message.model, response_id=message.id,
        usage=Usage(input_tokens=usage.input_tokens + read + written,
                    output_tokens=usage.output_tokens, cached_tokens=read),
        provider_content=None if plain else ProviderContent(
            api=API, items=[dump(block) for block in message.content]),
    )
