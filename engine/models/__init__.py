"""Models: the protocol the session asks a model through, the faux model, and adapters.

``engine.models`` holds the protocol (:mod:`.protocol`) and the faux model (:mod:`.faux`).
The adapters over the official SDKs are imported on their own, so that the core needs neither
SDK: ``engine.models.openai`` (Chat Completions and Responses, extra ``openai``) and
``engine.models.anthropic`` (Messages, extra ``anthropic``). :mod:`.formats` turns declared
tools into each provider's tool format and back; :mod:`.connect` opens the model a
``PROVIDER:MODEL`` spec names. docs/models.md describes all of it.
"""

from .faux import (
    FauxBlock,
    FauxModel,
    FauxScriptExhausted,
    FauxStep,
    FauxText,
    FauxToolCall,
    faux_message,
    faux_text,
    faux_tool_call,
)
from .protocol import (
    TRUNCATED_STOP_REASONS,
    Model,
    ModelDelta,
    ModelError,
    ModelInfo,
    ModelMessage,
    ModelRequest,
    model_info,
    truncated,
)

__all__ = [
    "TRUNCATED_STOP_REASONS",
    "FauxBlock",
    "FauxModel",
    "FauxScriptExhausted",
    "FauxStep",
    "FauxText",
    "FauxToolCall",
    "Model",
    "ModelDelta",
    "ModelError",
    "ModelInfo",
    "ModelMessage",
    "ModelRequest",
    "faux_message",
    "faux_text",
    "faux_tool_call",
    "model_info",
    "truncated",
]
