"""Adapters for OpenAI's APIs, over the official ``openai`` SDK (extra ``openai``).

:class:`OpenAIChatModel` speaks Chat Completions, :class:`OpenAIResponsesModel` the
Responses API. Each takes the host's ``AsyncOpenAI`` client, injected: its key, base URL,
retries and timeouts are the host's. The same adapters serve any OpenAI-compatible server
(vLLM, llama.cpp, Ollama) through the client's ``base_url``. The SDK is built on anyio, so it
runs under trio, retries, timeouts, streaming and cancellation included; open the client with
``async with``, which closes it (its ``__del__`` cannot, under trio).

The mapping, both ways, is in docs/models.md ("Mapping tables"). What an adapter does:

- sends the system prompt (Chat: a ``system`` message; Responses: ``instructions``), the
  transcript, and the declared tools (:mod:`engine.models.formats`);
- parses each call's argument string as JSON, passing a string that is not JSON through as
  it is, so validation fails that call alone;
- keeps the output items it does not interpret (Responses' reasoning items, annotated text)
  as the message's provider content, sent back unchanged on the next turn;
- streams when asked (``stream=True``): text and argument deltas go to the session's
  subscribers as they arrive; the message is returned whole at the end;
- turns the SDK's errors, and a refusal, into :class:`~engine.models.ModelError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.models import ModelFailureKind, ProviderContent, Usage
from events.types import AssistantMessage, ModelToolCall, UserMessage

from ..views import ToolResultEntry
from ._sdk import dump, import_sdk, provider_error
from .formats import (
    arguments_json,
    chat_tool,
    parse_arguments,
    responses_tool,
    result_blocks,
    result_text,
)
from .protocol import ModelDelta, ModelError, ModelInfo, ModelMessage, ModelRequest

openai = import_sdk("openai")

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel", "chat_messages", "responses_input"]

CHAT = "openai.chat"
RESPONSES = "openai.responses"


class _OpenAIModel:
    api = ""

    def __init__(self, client: Any, model: str, *, stream: bool = False,
                 settings: Mapping[str, Any] | None = None, provider: str = "openai") -> None:
        self._client = client
        self._model = model
        self._stream = stream
        self._settings = dict(settings or {})
        #: What the session records about this model with each request.
        self.info = ModelInfo(provider=provider, model=model, api=self.api.split(".")[1],
                              settings=self._settings, stream=stream)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next assistant message (see the module docstring)."""
        try:
            return await self._complete(request)
        except openai.OpenAIError as exc:
            error = provider_error(exc, openai)
            if error is None:
                raise
            raise error from exc

    async def _complete(self, request: ModelRequest) -> ModelMessage:
        raise NotImplementedError


class OpenAIChatModel(_OpenAIModel):
    """A model behind OpenAI's Chat Completions API (or a server that speaks it).

    ``settings`` are sent with every request (``temperature``, ``max_completion_tokens``,
    ...) and recorded. Example::

        async with openai.AsyncOpenAI() as client:
            model = OpenAIChatModel(client, "gpt-4.1-mini")
    """

    api = CHAT

    async def _complete(self, request: ModelRequest) -> ModelMessage:
        params: dict[str, Any] = {"model": self._model, "messages": chat_messages(request),
                                  **self._settings}
        if request.tools:
            params["tools"] = [chat_tool(tool) for tool in request.tools]
        if not self._stream:
            return chat_message(await self._client.chat.completions.create(**params))
        params.setdefault("stream_options", {"include_usage": True})
        async with self._client.chat.completions.stream(**params) as stream:
            async for event in stream:
                if event.type == "content.delta":
                    request.on_delta(ModelDelta(turn=request.turn, kind="text",
                                                text=event.delta))
                elif event.type == "tool_calls.function.arguments.delta":
                    request.on_delta(ModelDelta(turn=request.turn, kind="arguments",
                                                text=event.arguments_delta, index=event.index,
                                                name=event.name))
            return chat_message(await stream.get_final_completion())


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The request as Chat Completions messages."""
    messages: list[dict[str, Any]] = []
    if request.system is not None:
        messages.append({"role": "system", "content": request.system})
    for entry in request.transcript:
        if isinstance(entry, UserMessage):
            messages.append({"role": "user", "content": entry.text})
        elif isinstance(entry, AssistantMessage):
            kept = entry.provider_content
            if kept is not None and kept.api == CHAT:
                messages.extend(kept.items)
                continue
            message: dict[str, Any] = {"role": "assistant", "content": entry.text or None}
            if entry.tool_calls:
                message["tool_calls"] = [
                    {"id": call.id, "type": "function",
                     "function": {"name": call.name, "arguments": arguments_json(call.arguments)}}
                    for call in entry.tool_calls]
            messages.append(message)
        elif isinstance(entry, ToolResultEntry):
            messages.append({"role": "tool", "tool_call_id": entry.model_call_id or entry.call_id,
                             "content": result_text(entry.result)})
    return messages


def chat_message(completion: Any) -> ModelMessage:
    """A Chat Completions response as an assistant message."""
    if not completion.choices:
        raise ModelError("error", "the response has no choices", response_id=completion.id)
    choice = completion.choices[0]
    message = choice.message
    if getattr(message, "refusal", None):
        raise ModelError("refused", f"the model refused: {message.refusal}",
                         response_id=completion.id)
    calls = tuple(
        ModelToolCall(id=call.id, name=call.function.name,
                      arguments=parse_arguments(call.function.arguments or ""))
        for call in message.tool_calls or () if call.type == "function")
    usage = completion.usage
    return ModelMessage(
        text=message.content or "", tool_calls=calls,
        stop_reason=choice.finish_reason or "stop", model=completion.model,
        response_id=completion.id,
        usage=None if usage is None else Usage(
            input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
            cached_tokens=getattr(usage.prompt_tokens_details, "cached_tokens", None)),
    )


class OpenAIResponsesModel(_OpenAIModel):
    """A model behind OpenAI's Responses API. Each request sends the whole transcript
    (``store`` is left to ``settings``; ``previous_response_id`` is not used, so the log
    alone says what the model saw). Example::

        async with openai.AsyncOpenAI() as client:
            model = OpenAIResponsesModel(client, "gpt-4.1-mini", stream=True)
    """

    api = RESPONSES

    async def _complete(self, request: ModelRequest) -> ModelMessage:
        params: dict[str, Any] = {"model": self._model, "input": responses_input(request),
                                  **self._settings}
        if request.system is not None:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = [responses_tool(tool) for tool in request.tools]
        if not self._stream:
            return responses_message(await self._client.responses.create(**params))
        calls: dict[int, tuple[int, str | None, str | None]] = {}  # output index -> call
        async with self._client.responses.stream(**params) as stream:
            async for event in stream:
                if event.type == "response.output_text.delta":
                    request.on_delta(ModelDelta(turn=request.turn, kind="text",
                                                text=event.delta))
                elif event.type == "response.output_item.added" and \
                        event.item.type == "function_call":
                    calls[event.output_index] = (len(calls), event.item.call_id, event.item.name)
                elif event.type == "response.function_call_arguments.delta":
                    index, call_id, name = calls.get(event.output_index, (0, None, None))
                    request.on_delta(ModelDelta(turn=request.turn, kind="arguments",
                                                text=event.delta, index=index,
                                                call_id=call_id, name=name))
            return responses_message(await stream.get_final_response())


def responses_input(request: ModelRequest) -> list[dict[str, Any]]:
    """The transcript as Responses input items (the system prompt goes as
    ``instructions``)."""
    items: list[dict[str, Any]] = []
    for entry in request.transcript:
        if isinstance(entry, UserMessage):
            items.append({"role": "user", "content": entry.text})
        elif isinstance(entry, AssistantMessage):
            kept = entry.provider_content
            if kept is not None and kept.api == RESPONSES:
                items.extend(kept.items)
                continue
            if entry.text:
                items.append({"role": "assistant", "content": entry.text})
            items.extend({"type": "function_call", "call_id": call.id, "name": call.name,
                          "arguments": arguments_json(call.arguments)}
                         for call in entry.tool_calls)
        elif isinstance(entry, ToolResultEntry):
            items.append({"type": "function_call_output",
                          "call_id": entry.model_call_id or entry.call_id,
                          "output": _responses_output(entry)})
    return items


def _responses_output(entry: ToolResultEntry) -> str | list[dict[str, Any]]:
    """A result as a function call's output: text, or text and images as input parts."""
    blocks = result_blocks(entry.result)
    if all(kind == "text" for kind, _, _ in blocks):
        return result_text(entry.result)
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": "Error:"}] \
        if entry.result.is_error else []
    for kind, data, mime in blocks:
        parts.append({"type": "input_text", "text": data} if kind == "text" else
                     {"type": "input_image", "image_url": f"data:{mime};base64,{data}"})
    return parts


#: A failed response's error code, as a failure's kind.
_FAILURES: dict[str, ModelFailureKind] = {"rate_limit_exceeded": "rate_limited",
                                          "server_error": "server_error"}


def responses_message(response: Any) -> ModelMessage:
    """A Responses response as an assistant message."""
    if response.status == "failed":
        error = response.error
        code = getattr(error, "code", None) or "error"
        raise ModelError(_FAILURES.get(code, "error"),
                         f"the response failed: {code}: {getattr(error, 'message', '')}",
                         response_id=response.id)
    texts: list[str] = []
    calls: list[ModelToolCall] = []
    plain = True  # nothing in it the adapter does not interpret
    for item in response.output:
        if item.type == "function_call":
            calls.append(ModelToolCall(id=item.call_id, name=item.name,
                                       arguments=parse_arguments(item.arguments or "")))
        elif item.type == "message":
            for part in item.content:
                if part.type == "refusal":
                    raise ModelError("refused", f"the model refused: {part.refusal}",
                                     response_id=response.id)
                texts.append(part.text)
                plain = plain and not part.annotations
        else:  # reasoning, and the items of built-in tools
            plain = False
    if response.status == "incomplete":
        details = response.incomplete_details
        stop_reason = getattr(details, "reason", None) or "incomplete"
    else:
        stop_reason = response.status or "completed"
    usage = response.usage
    return ModelMessage(
        text="".join(texts), tool_calls=tuple(calls), stop_reason=stop_reason,
        model=response.model, response_id=response.id,
        usage=None if usage is None else Usage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cached_tokens=getattr(usage.input_tokens_details, "cached_tokens", None)),
        provider_content=None if plain else ProviderContent(
            api=RESPONSES, items=[dump(item) for item in response.output]),
    )
