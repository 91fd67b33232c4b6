"""Long outputs: what the model reads of a result, and where the whole is kept.

Step 8 of a call the model made (:func:`engine.runtime.calls.execute`) hands its final result
here before recording it. A result within its view (the tool's
:attr:`~engine.core.tools.ToolSpec.model_view`, else the session's) and within the log's
limit is recorded as it is: nothing here costs a normal call more than a comparison. A longer
one is recorded as the cut the model reads (:func:`engine.core.cutting.cut_result`) with a
:class:`~events.results.KeptResult` saying where the whole is: in the same record when it is
within ``max_result_bytes``, else in an artifact the store keeps (written, and waited for,
before the record that names it: a log never names an artifact its store was not given).

Only the model's own calls are cut: a nested call's result goes whole to the tool that asked
for it, and a host call's to the host, so their limit stays ``max_result_bytes``.
"""

from __future__ import annotations

from typing import cast

from events.artifacts import decode_artifact, encode_artifact
from events.results import KeptResult, ModelView, ToolResult
from events.stores.base import ArtifactStore, keeps_artifacts
from events.types import ToolCallCompleted

from ..core.cutting import READ_OUTPUT, cut_result, fallback_view, needs_cut
from ..core.environment import Environment
from ..core.limits import result_size
from ..core.outputs import Failure
from ..core.views import LiveCall
from .recorder import Recorder

__all__ = ["artifact_limit", "keep", "kept_as_is", "whole_result"]


def artifact_limit(env: Environment, recorder: Recorder, view: LiveCall) -> int | None:
    """The largest result the call may keep, as an artifact, when that is more than
    ``max_result_bytes``: a call the model made, in a session whose store keeps artifacts;
    ``None`` otherwise."""
    limits = env.limits
    if (view.origin != "model" or view.parent_id is not None
            or limits.max_artifact_bytes <= limits.max_result_bytes
            or not keeps_artifacts(recorder.store)):
        return None
    return limits.max_artifact_bytes


def _view_of(env: Environment, view: LiveCall) -> ModelView | None:
    spec = env.registry.specs.get(view.name)
    own = spec.model_view if spec is not None else None
    return own if own is not None else env.model_view


def kept_as_is(env: Environment, view: LiveCall, size: int | None) -> bool:
    """Whether a call's final result is recorded as it is, with nothing to measure or cut:
    a call the model did not make (the model reads only its own calls' results), or one
    whose tool has no model view and whose result's ``size`` is known to fit the log. Asked
    before :func:`keep`, so that the common case makes no coroutine."""
    if view.origin != "model" or view.parent_id is not None:
        return True
    return (size is not None and size <= env.limits.max_result_bytes
            and _view_of(env, view) is None)


async def keep(env: Environment, recorder: Recorder, view: LiveCall, result: ToolResult,
               size: int | None) -> tuple[ToolResult, KeptResult | None, Failure | None]:
    """What to record of a call's final result: the result the model reads, where the whole
    is kept if that is a cut, or why the call fails (``too_large``: even the cut is over
    the log's limit). ``size``: the result's :func:`~engine.core.limits.result_size`, if
    known."""
    if kept_as_is(env, view, size):
        return result, None, None
    limits = env.limits
    model_view = _view_of(env, view)
    if size is None:
        size = result_size(result)
    over = size > limits.max_result_bytes
    if not over and (model_view is None or not needs_cut(result, model_view)):
        return result, None, None
    reader = READ_OUTPUT in env.registry.specs
    cut = cut_result(result, model_view or fallback_view(limits), view.call_id, reader=reader)
    if (cut_size := result_size(cut)) > limits.max_result_bytes:
        return result, None, ("too_large", f"{view.name} returned {size} bytes; even the cut "
                              f"the model would read takes {cut_size}, over the limit of "
                              f"{limits.max_result_bytes}: set a smaller model_view", None,
                              None)
    data, sha256 = encode_artifact(result)
    if not over:
        return cut, KeptResult(size=size, sha256=sha256, whole=result), None
    store = cast(ArtifactStore, recorder.store)
    await store.put_artifact(recorder.session_id, view.call_id, sha256, data)
    return cut, KeptResult(size=size, sha256=sha256), None


async def whole_result(recorder: Recorder, call_id: str) -> ToolResult | None:
    """The whole result of a call of the session that ended completed: the one its record
    holds, or its artifact (:class:`~events.errors.ArtifactError` if that is missing or
    changed); ``None`` for a call that has not completed."""
    call = recorder.projection.live_calls.get(call_id)
    terminal = call.terminal if call is not None else None
    if not isinstance(terminal, ToolCallCompleted):
        return None
    kept = terminal.kept
    if kept is None:
        return terminal.result
    if kept.whole is not None:
        return kept.whole
    data = None
    if keeps_artifacts(recorder.store):
        data = await cast(ArtifactStore, recorder.store).get_artifact(
            recorder.session_id, call_id, kept.sha256)
    return decode_artifact(data, recorder.session_id, call_id, kept.sha256)
