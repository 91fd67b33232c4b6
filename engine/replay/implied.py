"""What a log implies beyond its single facts, for re-driving it.

- **Where the recorded session was stopped from outside**: a call cancelled while it waited
  for its approver or while its body ran. Each is a :class:`~engine.replay.recorded.Waiter`:
  the replay waits at the same place, and the cause says who ends the wait (the host, a
  timeout above it, or the parent's own cancel scope).
- **Where the log ends**: in the middle of a batch (the session paused, or its process
  stopped), whose calls the replay may carry further than the log could (:func:`cut_turn`).
- **Order between concurrent calls that share a tool's session grant.** A "for the session"
  answer about a nested call changes what the policy says about later calls of that tool,
  including calls nested under a sibling running at the same time (:func:`order_steps`).
- **The setup that wrote it**: the settings its start records (turns, depth, size limits),
  the policy's rules as its decisions name them, and an order of the handlers that keeps
  every call's order of verdicts.

Everything is read from fields: the rule a decision records, the limit a failure's detail
records, the session's settings. No message is read (logs written before those fields were
recorded get them from the codec's upcaster, :mod:`events.upcasters`).

Pure: no trio, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from events.types import (
    PolicyDecided,
    SessionSettings,
    ToolCallFailed,
    ToolCallRequested,
)

from ..core.callids import from_host
from ..core.limits import MAX_CALL_DEPTH, Limits
from ..core.policy import PolicyRules
from .recorded import (
    DEFAULT_MAX_DEPTH,
    RecordedCall,
    RecordedPrompt,
    WaitCause,
    WaitKind,
    Waiter,
    root_of,
    turn_of,
)

__all__ = [
    "cut_turn",
    "infer_limits",
    "infer_max_depth",
    "infer_max_turns",
    "infer_rules",
    "order_names",
    "order_steps",
    "waiters",
]


def cut_turn(prompts: Sequence[RecordedPrompt], calls: dict[str, RecordedCall]) -> int | None:
    """The last turn, if the log ends before every call of its batch has ended."""
    if not prompts or not prompts[-1].turns:
        return None
    message = prompts[-1].turns[-1].message
    ids = [f"{message.turn}.{i}" for i in range(len(message.tool_calls))]
    if any(i not in calls for i in ids) or any(
        c.terminal is None for c in calls.values() if turn_of(c.call_id) == message.turn
    ):
        return message.turn
    return None


def waiters(calls: dict[str, RecordedCall]) -> dict[str, Waiter]:
    """The places where a cancelled call waited (see :meth:`RecordedSession.chain_waiter`)."""
    found: dict[str, Waiter] = {}
    for call in calls.values():
        if not call.cancelled:
            continue
        kind: WaitKind | None = None
        if call.asked_seq is not None and call.answer is None:
            kind = "approval"
        elif call.started:
            last = call.body[-1] if call.body else None
            if not (isinstance(last, ToolCallRequested) and calls[last.call_id].cancelled):
                kind = "body"
        if kind is not None:
            found[call.call_id] = Waiter(call_id=call.call_id, kind=kind,
                                         cause=_cause(calls, call))
    return found


def _cause(calls: dict[str, RecordedCall], call: RecordedCall) -> WaitCause:
    """Who stopped a cancelled call: the nearest ancestor that was not cancelled decides."""
    ancestor = call.parent_id
    while ancestor is not None and calls[ancestor].cancelled:
        ancestor = calls[ancestor].parent_id
    if ancestor is None:
        return "host"
    terminal = calls[ancestor].terminal
    if isinstance(terminal, ToolCallFailed) and terminal.kind == "timeout":
        return "timeout"
    return "scope"


def order_steps(
    calls: dict[str, RecordedCall],
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[tuple[str, str], ...]]]:
    """For calls that run at the same time (nested calls of concurrent top-level calls, host
    calls and the calls under them beside any other call), the recorded order between policy
    decisions and "for the session" answers about the same tool.

    ``decision_deps[c]``: the calls whose session-wide answer the log holds before ``c``'s
    policy decision. ``grant_deps[c]``: the ``(call, "decision" | "grant")`` steps the log
    holds before ``c``'s session-wide answer. Answers given at a pause are left out: the
    pause itself orders them.
    """
    steps: dict[str, list[tuple[int, str, str]]] = {}
    for call in calls.values():
        key = call.name
        if call.decided_seq is not None:
            steps.setdefault(key, []).append((call.decided_seq, "decision", call.call_id))
        answer = call.answer
        if answer is not None and answer.scope == "session" and not answer.later:
            steps.setdefault(key, []).append((answer.seq, "grant", call.call_id))
    decision_deps: dict[str, tuple[str, ...]] = {}
    grant_deps: dict[str, tuple[tuple[str, str], ...]] = {}
    for group in steps.values():
        group.sort()
        for index, (_, kind, call_id) in enumerate(group):
            earlier = [(k, c) for _, k, c in group[:index] if _beside(c, call_id)]
            if kind == "decision":
                grants = tuple(c for k, c in earlier if k == "grant")
                if grants:
                    decision_deps[call_id] = grants
            elif earlier:
                grant_deps[call_id] = tuple((c, k) for k, c in earlier)
    return decision_deps, grant_deps


def _beside(one: str, other: str) -> bool:
    """Whether two calls may run at the same time: under different top-level calls of one
    batch, or one of them under a host call (those run beside everything)."""
    if root_of(one) == root_of(other):
        return False
    return from_host(one) or from_host(other) or turn_of(one) == turn_of(other)


# -- the setup the log implies ---------------------------------------------------------------

def infer_rules(calls: dict[str, RecordedCall]) -> PolicyRules:
    """The host's rules as far as the log shows them: every pattern a decision records
    (``PolicyDecided.rule``).

    A rule that decided nothing in the log changes nothing when the same calls are judged
    again, so these rules judge every recorded call as the original ones did. Where two
    patterns of one kind match a name, the one the log names comes first.
    """
    found: dict[str, list[tuple[str, str]]] = {"deny": [], "allow": [], "ask": []}
    for call in calls.values():
        for event in call.events:
            if isinstance(event, PolicyDecided) and event.rule is not None:
                found[event.decision].append((event.rule, call.name))
    ordered: dict[str, tuple[str, ...]] = {}
    for kind, decided in found.items():
        patterns = list(dict.fromkeys(p for p, _ in decided))
        # the pattern the log names comes before every other one that matches the name
        sequences = [[p] for p in patterns] + [
            [p, q] for p, name in decided for q in patterns if q != p and fnmatchcase(name, q)]
        ordered[kind] = order_names(sequences, unique=True) if patterns else ()
    return PolicyRules(allow=ordered["allow"], deny=ordered["deny"], ask=ordered["ask"])


def infer_max_depth(settings: SessionSettings | None, calls: dict[str, RecordedCall]) -> int:
    """The depth limit the session's settings record; in a log without them, the limit a
    ``depth_limit`` failure's detail records (if the failing call is deeper than it, as the
    engine's are), else one deep enough for the log. Never past
    :data:`~engine.core.limits.MAX_CALL_DEPTH` (a session cannot be opened deeper)."""
    if settings is not None:
        return min(max(settings.max_depth, 0), MAX_CALL_DEPTH)
    for call in calls.values():
        terminal = call.terminal
        if isinstance(terminal, ToolCallFailed) and terminal.kind == "depth_limit":
            limit = terminal.detail.limit if terminal.detail is not None else None
            # the failing call is deeper than the limit: a detail naming a limit it is not
            # deeper than was not written by the engine, and is not believed
            if limit is not None and 0 <= limit < call.call_id.count("/"):
                return min(limit, MAX_CALL_DEPTH)
    deepest = max((call_id.count("/") for call_id in calls), default=0)
    return min(max(DEFAULT_MAX_DEPTH, deepest), MAX_CALL_DEPTH)


def infer_max_turns(settings: SessionSettings | None, prompts: Sequence[RecordedPrompt]) -> int:
    """The turn limit the settings record; in a log without them, the most turns a prompt
    took (a limit that stopped no prompt changes nothing when they run again)."""
    if settings is not None:
        return max(settings.max_turns, 1)
    return max([1, *(len(prompt.turns) for prompt in prompts)])


def infer_limits(settings: SessionSettings | None) -> Limits:
    """The size limits the settings record; in a log without them, ``Session.open``'s
    defaults. A log that does not record ``max_artifact_bytes`` was written before results
    were kept as artifacts: it kept none, and neither does its replay."""
    if settings is None:
        return Limits(max_artifact_bytes=Limits().max_result_bytes)  # no artifacts then
    result_bytes = max(settings.max_result_bytes, 1)
    # a log written before artifacts were recorded kept none
    artifact_bytes = settings.max_artifact_bytes or result_bytes
    return Limits(max_argument_bytes=max(settings.max_argument_bytes, 1),
                  max_result_bytes=result_bytes, max_artifact_bytes=max(artifact_bytes, 1))


def order_names(sequences: Iterable[Sequence[str]], *, unique: bool = False) -> tuple[str, ...]:
    """One order of names that keeps every sequence's order (a topological sort, ties broken
    by first appearance). A name that occurs twice in one sequence (two handlers with one
    name) occurs as often in the result, unless ``unique``."""
    nodes: dict[tuple[str, int], None] = {}
    edges: dict[tuple[str, int], set[tuple[str, int]]] = {}
    for sequence in sequences:
        seen: dict[str, int] = {}
        previous: tuple[str, int] | None = None
        for name in sequence:
            occurrence = 0 if unique else seen.get(name, 0)
            seen[name] = occurrence + 1
            node = (name, occurrence)
            nodes.setdefault(node, None)
            if previous is not None and previous != node:
                edges.setdefault(previous, set()).add(node)
            previous = node
    rank = {node: index for index, node in enumerate(nodes)}
    incoming = {node: 0 for node in nodes}
    for targets in edges.values():
        for target in targets:
            incoming[target] += 1
    order: list[str] = []
    ready = [node for node in nodes if incoming[node] == 0]
    placed: set[tuple[str, int]] = set()
    while ready:
        node = ready.pop(0)
        placed.add(node)
        order.append(node[0])
        for target in edges.get(node, ()):
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
        ready.sort(key=rank.__getitem__)
    order.extend(node[0] for node in nodes if node not in placed)  # a cycle: keep log order
    return tuple(order)
