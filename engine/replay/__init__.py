"""Re-drive replay: run a recorded session again and report where it now goes another way.

Replay has two levels. **Fold** (:func:`engine.fold`) rebuilds state, transcript and call tree
from the log without running anything. **Re-drive** (:func:`redrive`, ``toolledger replay``)
runs the session again: the model is answered from the recorded assistant messages, the
approver from the recorded answers (by the engine's call id), and each call either from its
recorded result (``tool_mode="recorded"``) or by the real tool (``"live"``, only from records
verified with the log's key, or when told ``unverified=True``: :mod:`.trust`). The two logs are
then compared per call and per transcript entry, never by global order, since concurrent calls
may interleave differently; the report names the first divergence of each call.

Re-drive is the one place where today's handlers and policy are asked again on purpose, to see
what they would decide about yesterday's calls::

    report = await redrive(records, rules=PolicyRules(deny=["delete_file"]))
    if not report.ok:
        console.print(report)

Where things are: reading a log for a replay, :mod:`.reading` (the values in :mod:`.recorded`,
what the log implies beyond single facts in :mod:`.implied`); the stand-ins that answer from
it, :mod:`.answers` (model, approver, handlers) and :mod:`.stubs` (tool bodies); what they
wait on while the replay runs, :mod:`.watch`; which records may run live tools,
:mod:`.trust`; running it, :mod:`.driver`; comparing,
:mod:`.compare`; the report, :mod:`.report`. docs/replay.md says what is compared and why.
"""

from .compare import Divergence
from .driver import Progress, ReplaySetup, redrive
from .recorded import ReplayError
from .report import ReplayReport, ToolMode, render_report
from .trust import UnverifiedLogError, VerifiedRecords, read_verified

__all__ = [
    "Divergence",
    "Progress",
    "ReplayError",
    "ReplayReport",
    "ReplaySetup",
    "ToolMode",
    "UnverifiedLogError",
    "VerifiedRecords",
    "read_verified",
    "redrive",
    "render_report",
]
