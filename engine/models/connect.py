"""A model named on a command line: ``openai:MODEL``, ``openai-responses:MODEL`` or
``anthropic:MODEL``, with the official SDK's client opened for it.

The key comes from the SDK's usual environment variable (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``); ``base_url`` points the client at another server (an
OpenAI-compatible one such as vLLM, llama.cpp or Ollama, which may need no key). The client is
closed when the block ends.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .protocol import Model

__all__ = ["PROVIDERS", "check_spec", "open_model"]

#: The prefixes a model spec may have, and what each means.
PROVIDERS = {
    "openai": "OpenAI Chat Completions (or any server that speaks it, with --base-url)",
    "openai-responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
}
_KEYS = {"openai": "OPENAI_API_KEY", "openai-responses": "OPENAI_API_KEY",
         "anthropic": "ANTHROPIC_API_KEY"}


def check_spec(spec: str, *, base_url: str | None = None) -> tuple[str, str, str | None]:
    """``(provider, model, key)`` for ``spec``; a ``ValueError`` saying what to write if it
    names no known provider, or what to set if the key is missing (without ``base_url``)."""
    provider, _, name = spec.partition(":")
    if provider not in PROVIDERS or not name:
        raise ValueError(f"--model {spec!r}: write PROVIDER:MODEL, with PROVIDER one of "
                         f"{', '.join(PROVIDERS)} (e.g. openai:gpt-4.1-mini)")
    key = os.environ.get(_KEYS[provider])
    if key is None and base_url is None:
        raise ValueError(f"--model {spec}: set {_KEYS[provider]} (or give --base-url for a "
                         f"server that needs no key)")
    return provider, name, key


@asynccontextmanager
async def open_model(spec: str, *, base_url: str | None = None,
                     stream: bool = False) -> AsyncIterator[Model]:
    """The model ``spec`` names, over a client opened for the block. A spec without a known
    prefix, or a missing key (without ``base_url``), is a ``ValueError`` saying what to do."""
    provider, name, key = check_spec(spec, base_url=base_url)
    if provider == "anthropic":
        from . import anthropic as adapter

        async with adapter.anthropic.AsyncAnthropic(api_key=key or "unused",
                                                    base_url=base_url) as aclient:
            yield adapter.AnthropicModel(aclient, name, stream=stream)
        return
    from . import openai as openai_adapter

    async with openai_adapter.openai.AsyncOpenAI(api_key=key or "unused",
                                                 base_url=base_url) as client:
        if provider == "openai":
            yield openai_adapter.OpenAIChatModel(client, name, stream=stream)
        else:
            yield openai_adapter.OpenAIResponsesModel(client, name, stream=stream)
