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
- gives each tool a name the API takes (:mod:`engine.models.toolnames`: ``notes.read`` is
  sent as ``notes_read``) and reads the names in the reply back;
- parses each call's argument string as JSON, passing a string that is not JSON through as
  it is, so validation fails that call alone;
- reads the reply field by field (:mod:`engine.models.replies`): a reply that is not in the
  API's format fails the turn with a :class:`~engine.models.ModelError` naming the field;
- keeps the output items it does not interpret (Responses' reasoning items, annotated text)
  as the message's provider content, sent back unchanged on the next turn;
- streams when asked (``stream=True``): text and argument deltas go to the session's
  subscribers as they arrive; the message is returned whole at the end;
- turns the SDK's errors, and a refusal, into :class:`~engine.models.ModelError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.modelturns import ModelFailureKind, ProviderContent, Usage
from events.types import AssistantMessage, UserMessage

from ..core.views import ToolResultEntry
from ._sdk import dump, import_sdk, provider_error
from .formats import (
    arguments_json,
    chat_tool,
    parse_arguments,
    responses_tool,
    result_blocks,
    result_text,
)
from .protocol import ModelError, ModelInfo, ModelMessage, ModelRequest
from .replies import Part, Streamed, reading, sendable
from .toolnames import ToolNames

openai = import_sdk("openai")

__all__ = ["OpenAIChatModel", "OpenAIResponsesModel", "chat_messages", "responses_input"]

CHAT = "openai.chat"
RESPONSES = "openai.responses"
CHAT_FORMAT = "Chat Completions"
RESPONSES_FORMAT = "Responses"


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
            return await self._complete(request, ToolNames.of(request))
        except openai.OpenAIError as exc:
            raise provider_error(exc, openai) from exc

    async def _complete(self, request: ModelRequest, names: ToolNames) -> ModelMessage:
        raise NotImplementedError


class OpenAIChatModel(_OpenAIModel):
    """A model behind OpenAI's Chat Completions API (or a server that speaks it).

    ``settings`` are sent with every request (``temperature``, ``max_completion_tokens``,
    ...) and recorded. Example::

        async with openai.AsyncOpenAI() as client:
            model = OpenAIChatModel(client, "gpt-4.1-mini")
    """

    api = CHAT

    async def _complete(self, request: ModelRequest, names: ToolNames) -> ModelMessage:
        params: dict[str, Any] = {"model": self._model,
                                  "messages": chat_messages(request, names), **self._settings}
        if request.tools:
            params["tools"] = [chat_tool(tool, name=names.sent(tool.name))
                               for tool in request.tools]
        if not self._stream:
            answer = await self._client.chat.completions.with_raw_response.create(**params)
            with reading(CHAT_FORMAT, openai.OpenAIError):
                return chat_message(answer.parse(), names)
        params.setdefault("stream_options", {"include_usage": True})
        streamed = Streamed(request, names)  # a call is keyed by its index in the message
        async with self._client.chat.completions.stream(**params) as stream:
            with reading(CHAT_FORMAT, openai.OpenAIError):
                async for event in stream:
                    if event.type == "content.delta":
                        streamed.text(event.delta)
                    elif event.type == "tool_calls.function.arguments.delta":
                        streamed.call(event.index, None, event.name)
                        streamed.arguments(event.index, event.arguments_delta)
                try:
                    final = await stream.get_final_completion()
                except (openai.LengthFinishReasonError,
                        openai.ContentFilterFinishReasonError) as exc:
                    # the SDK's check for its own parsing: the message, cut off or filtered,
                    # is still the answer, and its stop reason says so
                    final = exc.completion
                return chat_message(final, names)


def chat_messages(request: ModelRequest,
                  names: ToolNames | None = None) -> list[dict[str, Any]]:
    """The request as Chat Completions messages (``names``: the tools' names at the provider,
    by default :meth:`ToolNames.of` the request)."""
    names = ToolNames.of(request) if names is None else names
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
                     "function": {"name": names.sent(call.name),
                                  "arguments": arguments_json(call.arguments)}}
                    for call in entry.tool_calls]
            messages.append(message)
        elif isinstance(entry, ToolResultEntry):
            messages.append({"role": "tool", "tool_call_id": entry.model_call_id or entry.call_id,
                             "content": result_text(entry.result)})
    return messages


def chat_message(completion: Any, names: ToolNames | None = None) -> ModelMessage:
    """A Chat Completions response as an assistant message (``names``: the request's tool
    names, to read the calls' back); a ``ModelError`` naming the field if it is not one."""
    names = ToolNames(()) if names is None else names
    reply = Part.of(completion, CHAT_FORMAT)
    choices = reply.items("choices")
    if not choices:
        raise reply.error("it has no choices")
    choice = choices[0]
    message = choice.part("message")
    refusal = message.optional_text("refusal")
    if refusal:
        raise ModelError("refused", f"the model refused: {refusal}",
                         response_id=reply.response_id)
    calls = []
    for call in message.items("tool_calls"):
        if call.text("type") == "function":  # not a custom tool's: none is declared
            function = call.part("function")
            calls.append(names.call(call.text("id"), function.text("name"),
                                    parse_arguments(function.get("arguments"))))
    usage = reply.optional_part("usage")
    details = None if usage is None else usage.optional_part("prompt_tokens_details")
    return sendable(ModelMessage(
        text=message.optional_text("content") or "", tool_calls=calls,
        stop_reason=choice.optional_text("finish_reason") or "stop",
        model=reply.optional_text("model"), response_id=reply.optional_text("id"),
        usage=None if usage is None else Usage(
            input_tokens=usage.count("prompt_tokens"),
            output_tokens=usage.count("completion_tokens"),
            cached_tokens=None if details is None else details.count("cached_tokens")),
    ), reply)


class OpenAIResponsesModel(_OpenAIModel):
    """A model behind OpenAI's Responses API. Each request sends the whole transcript
    (``store`` is left to ``settings``; ``previous_response_id`` is not used, so the log
    alone says what the model saw). Example::

        async with openai.AsyncOpenAI() as client:
            model = OpenAIResponsesModel(client, "gpt-4.1-mini", stream=True)
    """

    api = RESPONSES

    async def _complete(self, request: ModelRequest, names: ToolNames) -> ModelMessage:
        params: dict[str, Any] = {"model": self._model,
                                  "input": responses_input(request, names), **self._settings}
        if request.system is not None:
            params["instructions"] = request.system
        if request.tools:
            params["tools"] = [responses_tool(tool, name=names.sent(tool.name))
                               for tool in request.tools]
        if not self._stream:
            answer = await self._client.responses.with_raw_response.create(**params)
            with reading(RESPONSES_FORMAT, openai.OpenAIError):
                return responses_message(answer.parse(), names)
        streamed = Streamed(request, names)  # a call is keyed by its output item's index
        async with self._client.responses.stream(**params) as stream:
            with reading(RESPONSES_FORMAT, openai.OpenAIError):
                async for event in stream:
                    if event.type == "response.output_text.delta":
                        streamed.text(event.delta)
                    elif event.type == "response.output_item.added" and \
                            event.item.type == "function_call":
                        streamed.call(event.output_index, event.item.call_id, event.item.name)
                    elif event.type == "response.function_call_arguments.delta":
                        streamed.arguments(event.output_index, event.delta)
                return responses_message(await stream.get_final_response(), names)


def responses_input(request: ModelRequest,
                    names: ToolNames | None = None) -> list[dict[str, Any]]:
    """The transcript as Responses input items (the system prompt goes as
    ``instructions``; ``names`` as for :func:`chat_messages`)."""
    names = ToolNames.of(request) if names is None else names
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
            items.extend({"type": "function_call", "call_id": call.id,
                          "name": names.sent(call.name),
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


def responses_message(response: Any, names: ToolNames | None = None) -> ModelMessage:
    """A Responses response as an assistant message (``names`` as for :func:`chat_message`);
    a ``ModelError`` naming the field if it is not one."""
    names = ToolNames(()) if names is None else names
    reply = Part.of(response, RESPONSES_FORMAT)
    status = reply.optional_text("status")
    if status == "failed":
        error = reply.optional_part("error")
        code = (None if error is None else error.optional_text("code")) or "error"
        said = (None if error is None else error.optional_text("message")) or ""
        raise ModelError(_FAILURES.get(code, "error"), f"the response failed: {code}: {said}",
                         response_id=reply.response_id)
    texts: list[str] = []
    calls = []
    plain = True  # nothing in it the adapter does not interpret
    output = reply.items("output")
    for item in output:
        kind = item.text("type")
        if kind == "function_call":
            calls.append(names.call(item.text("call_id"), item.text("name"),
                                    parse_arguments(item.get("arguments"))))
        elif kind == "message":
            for part in item.items("content"):
                if part.get("type") == "refusal":
                    raise ModelError("refused",
                                     f"the model refused: {part.optional_text('refusal') or ''}",
                                     response_id=reply.response_id)
                texts.append(part.text("text"))
                plain = plain and not part.get("annotations")
        else:  # reasoning, and the items of built-in tools
            plain = False
    details = reply.optional_part("incomplete_details")
    reason = None if details is None or status != "incomplete" else details.optional_text("reason")
    usage = reply.optional_part("usage")
    cached = None if usage is None else usage.optional_part("input_tokens_details")
    return sendable(ModelMessage(
        text="".join(texts), tool_calls=calls,
        stop_reason=reason or status or "completed",
        model=reply.optional_text("model"), response_id=reply.optional_text("id"),
        usage=None if usage is None else Usage(
            input_tokens=usage.count("input_tokens"), output_tokens=usage.count("output_tokens"),
            cached_tokens=None if cached is None else cached.count("cached_tokens")),
        provider_content=None if plain else ProviderContent(
            api=RESPONSES, items=[dump(item.value) for item in output]),
    ), reply)
