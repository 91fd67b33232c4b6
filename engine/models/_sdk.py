"""What the OpenAI and Anthropic adapters share: importing an SDK with a clear message when
its extra is missing, and one mapping from the SDKs' exceptions to :class:`ModelError`.

Both SDKs raise the same family of exceptions (``APIConnectionError``,
``APITimeoutError``, ``APIStatusError`` and its subclasses per status). The mapping is read
by name from the SDK module the adapter passes, so it serves both without importing either.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from events.modelturns import ModelFailureKind

from .protocol import ModelError

__all__ = ["dump", "import_sdk", "provider_error"]


def import_sdk(name: str) -> ModuleType:
    """The SDK module ``name``, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"engine.models.{name} needs the {name!r} package: pip install 'toolledger[{name}]'"
        ) from exc


def provider_error(exc: BaseException, sdk: ModuleType) -> ModelError:
    """``exc``, an exception of ``sdk`` (its client's, after its own retries), as a
    :class:`ModelError`."""
    status: int | None = getattr(exc, "status_code", None)
    kind: ModelFailureKind
    if not isinstance(exc, (sdk.APIError, sdk.APIConnectionError)):
        kind = "error"  # the SDK's own checks (a stream's helpers, a missing setting)
    elif isinstance(exc, sdk.APITimeoutError):
        kind = "timeout"
    elif isinstance(exc, sdk.APIConnectionError):
        kind = "connection"
    elif isinstance(exc, sdk.RateLimitError):
        kind = "rate_limited"
    elif isinstance(exc, sdk.APIStatusError) and status is not None and status >= 500:
        kind = "server_error"
    elif isinstance(exc, sdk.APIStatusError) and status == 408:
        kind = "timeout"
    elif isinstance(exc, sdk.APIStatusError):
        kind = "bad_request"
    else:  # an error event in a stream, a response that did not validate
        kind = "error"
    return ModelError(kind, f"{type(exc).__name__}: {exc}", status=status,
                      request_id=getattr(exc, "request_id", None))


def dump(value: Any) -> Any:
    """An SDK response object (pydantic) as JSON, without the fields it left unset; a part the
    SDK left as it came (a dict: it could not type it) as it is. The session keeps it only if
    it is JSON within its limits."""
    if not hasattr(value, "model_dump"):
        return value
    # ``warnings=False``: a field of another type than the SDK declares is the provider's
    # doing, and is dumped as it came rather than warned about
    return value.model_dump(mode="json", exclude_none=True, warnings=False)
