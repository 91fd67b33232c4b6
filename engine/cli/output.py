"""``toolledger show LOG --output CALL``: the whole result of one call.

The model may have read a cut of a long result (docs/tools.md, "Long outputs"); the log keeps
the whole, in the call's record or as an artifact the store holds. This prints it: its text
(each block that is not text named in words), made safe for a terminal, or with ``--json`` the
result as the codec writes it. An artifact that is missing or does not match its record's hash
is an error naming it (exit 1), never a silent cut.
"""

from __future__ import annotations

from contextlib import closing
from typing import cast

import trio

from events.artifacts import decode_artifact
from events.codec import converter
from events.results import ToolResult
from events.stores.base import ArtifactStore, keeps_artifacts
from events.types import ToolCallCompleted

from ..core.cutting import model_text
from ..core.visible import visible, visible_json
from ._common import UsageError, fold_sessions, open_log, read_sessions

__all__ = ["print_output"]


def print_output(log: str, session: str | None, call_id: str, *, as_json: bool) -> int:
    """Print the whole result of ``call_id`` in the one session of ``log`` (or ``session``);
    the exit status."""
    sessions = read_sessions(log, session)
    if len(sessions) != 1:
        raise UsageError(f"--output names a call of one session, and {log} holds "
                         f"{len(sessions)}: give --session ID")
    [(session_id, _)] = sessions.items()
    [projection] = fold_sessions(log, sessions)
    call = projection.calls.get(call_id)
    terminal = call.terminal if call is not None else None
    if not isinstance(terminal, ToolCallCompleted):
        said = "has no result (it did not complete)" if call is not None else "is not a call"
        raise UsageError(f"--output {visible(call_id, newlines=False)}: it {said} of session "
                         f"{visible(session_id, newlines=False)}; `toolledger show` lists the "
                         f"calls")
    kept = terminal.kept
    # an artifact missing or changed is an ArtifactError: the command says so (exit 1)
    whole = (terminal.result if kept is None else kept.whole if kept.whole is not None
             else trio.run(_artifact, log, session_id, call_id, kept.sha256))
    if as_json:
        print(visible_json(converter.unstructure(whole)))
    else:
        print(visible(model_text(whole)))
    return 0


async def _artifact(log: str, session_id: str, call_id: str, sha256: str) -> ToolResult:
    with closing(open_log(log)) as store:
        data = None
        if keeps_artifacts(store):
            data = await cast(ArtifactStore, store).get_artifact(session_id, call_id, sha256)
        return decode_artifact(data, session_id, call_id, sha256)
