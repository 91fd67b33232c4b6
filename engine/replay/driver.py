"""Re-drive: run a recorded session again, answered from its log, and compare.

:func:`redrive` opens a fresh session on a :class:`~events.MemoryStore` under the recorded
session's id and metadata, registers the recorded tools (stand-ins that give back the recorded
results, or the live ones), and sends each recorded user message as a ``prompt()``. The model
answers from the log turn by turn; the approver by call id; the handlers and the policy are the
ones the log shows, unless today's are given: that is the point of a replay, to ask today's
handlers and policy about yesterday's calls. At a pause it answers what the host answered
then and resumes. Then it compares the two logs (:mod:`engine.replay.judging`, over
:mod:`engine.replay.compare`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import trio

from events.codec import converter
from events.modelturns import SystemPromptSet
from events.stores import MemoryStore
from events.stores.base import ArtifactStore
from events.types import (
    ActiveToolsSet,
    ExecutionMode,
    Record,
    ToolRegistered,
    ToolSnapshot,
    ToolsActivated,
)

from ..core.approvals import ApprovalRequest
from ..core.callids import from_host
from ..core.codemode import is_code_tool
from ..core.handlers import ToolCallHandler, ToolResultHandler
from ..core.policy import PolicyRules
from ..core.questions import Question
from ..core.registry import Registry
from ..core.tools import ToolSpec, runs_in_order
from ..runtime.session import PromptResult, Session
from .answers import (
    RecordedApprover,
    RecordedAsker,
    RecordedModel,
    RecordedTurnsEnded,
    recorded_call_handlers,
    recorded_result_handlers,
    sequencing_handler,
)
from .compare import Divergence
from .hosts import ReplayedHosts
from .judging import draw_up
from .reading import read_log
from .recorded import (
    RecordedSession,
    RecordedTurn,
    ReplayError,
    SessionAction,
    Waiter,
    turn_of,
)
from .report import ReplayReport, ToolMode
from .stubs import RecordedTools
from .trust import VerifiedRecords, check_live, records_of, unverified_note
from .watch import Watch

__all__ = ["Progress", "ReplaySetup", "redrive"]

#: Called as the replay goes: ``(records of the log covered so far, records in the log)``.
Progress = Callable[[int, int], None]


def _optional_tuple(value: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class ReplaySetup:
    """What to replay with instead of what the log shows: today's tools, handlers, policy.

    ``None`` (the default of every field but ``tools``) means "as the log shows it": the
    handlers' recorded verdicts, the policy rules the decisions record, the recorded depth
    limit. A ``--setup`` module exposes one of these, or a function that takes no arguments
    and returns one (it may prepare what live tools need first, e.g. a scratch directory)::

        from engine import PolicyRules
        from engine.replay import ReplaySetup
        from myproject.tools import all_tools
        from myproject.guards import no_rm

        def setup() -> ReplaySetup:
            return ReplaySetup(tools=all_tools(), handlers=[no_rm],
                               rules=PolicyRules(deny=["delete_*"]))
    """

    tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=tuple)
    handlers: tuple[ToolCallHandler, ...] | None = attrs.field(default=None,
                                                               converter=_optional_tuple)
    result_handlers: tuple[ToolResultHandler, ...] | None = attrs.field(
        default=None, converter=_optional_tuple)
    rules: PolicyRules | None = None
    max_depth: int | None = None


async def redrive(
    records: Iterable[Record] | VerifiedRecords,
    *,
    tools: Iterable[ToolSpec] = (),
    tool_mode: ToolMode = "recorded",
    unverified: bool = False,
    handlers: Iterable[ToolCallHandler] | None = None,
    result_handlers: Iterable[ToolResultHandler] | None = None,
    rules: PolicyRules | None = None,
    max_depth: int | None = None,
    clock: Callable[[], float] | None = None,
    progress: Progress | None = None,
    artifacts: ArtifactStore | None = None,
) -> ReplayReport:
    """Run the session ``records`` hold again and report the first divergence per call.

    ``tool_mode="recorded"`` answers every call from its recorded result (``tools``, if
    given, supply today's declarations: schemas, annotations, exposure, mode, timeout);
    ``"live"`` runs ``tools``, which must include every tool the log registered. Live tools
    run only from records verified with the log's key (:class:`VerifiedRecords`, from
    :func:`read_verified`), or, from any records, with ``unverified=True``; else
    :class:`UnverifiedLogError` (a :class:`ReplayError`) before anything runs. The report
    says whether the records were verified (``report.verified``, and a note if not).
    ``handlers``, ``result_handlers``, ``rules`` and ``max_depth`` are today's; ``None``
    replays what the log shows (the handlers' recorded verdicts, the rules its decisions
    record, the settings its start records). ``clock`` stamps the replay's records (default ``time.time``); record times are
    never compared. ``artifacts``: the store the records were read from, for a recorded call
    whose whole result it keeps as an artifact (docs/tools.md, "Long outputs"): the replay
    gives the tool back the whole, as the tool gave it. Runs in the caller's trio loop; raises :class:`ReplayError` if the
    records are not one consistent session or a live tool is missing. Example::

        report = await redrive(records, rules=PolicyRules(deny=["delete_file"]))
        for divergence in report.divergences:
            print(divergence.describe())
    """
    if tool_mode not in ("recorded", "live"):
        raise ValueError(f"tool_mode must be 'recorded' or 'live', not {tool_mode!r}")
    given, verified = records_of(records)
    check_live(tool_mode, verified=verified, unverified=unverified, remedy=(
        "Read the records with engine.replay.read_verified(store, session_id) from a store "
        "given the log's key, or pass unverified=True to run the tools anyway (only for a "
        "log nobody else could have written)."))
    book = read_log(given)
    replay = _Replay(
        book, tools=list(tools), tool_mode=tool_mode,
        handlers=None if handlers is None else list(handlers),
        result_handlers=None if result_handlers is None else list(result_handlers),
        rules=rules, max_depth=max_depth, clock=clock, progress=progress, verified=verified,
        artifacts=artifacts,
    )
    return await replay.run()


class _Replay:
    """One re-drive of one session."""

    def __init__(
        self,
        book: RecordedSession,
        *,
        tools: list[ToolSpec],
        tool_mode: ToolMode,
        handlers: list[ToolCallHandler] | None,
        result_handlers: list[ToolResultHandler] | None,
        rules: PolicyRules | None,
        max_depth: int | None,
        clock: Callable[[], float] | None,
        progress: Progress | None,
        verified: bool,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.book = book
        self.verified = verified
        self.tool_mode = tool_mode
        self.today = {spec.name: spec for spec in tools}
        if len(self.today) != len(tools):
            raise ReplayError("two of the tools given have the same name")
        if tool_mode == "live":
            missing = [name for name in book.registered if name not in self.today]
            if missing:
                raise ReplayError(
                    f"--tools live needs the code of every tool the log registered; none given "
                    f"for: {', '.join(missing)}"
                )
        self.handlers = handlers
        self.result_handlers = result_handlers
        self.rules = rules if rules is not None else book.rules
        self.max_depth = max_depth if max_depth is not None else book.max_depth
        self.clock = clock or time.time
        self.progress = progress
        self.watch = Watch(book, self.concurrent)
        self.timeouts: dict[str, float | None] = {}
        self.modes: dict[str, ExecutionMode] = {}
        self.stubs = RecordedTools(book, self.watch, self.timeouts, artifacts)
        self.found: list[Divergence] = []
        self.notes: list[str] = [] if verified else [unverified_note(tool_mode)]
        self.reported_missing: set[str] = set()
        self.session: Session | None = None
        self.hosts = ReplayedHosts(book, self.watch)

    # -- tools ------------------------------------------------------------------------------

    def spec_for(self, snapshot: ToolSnapshot) -> ToolSpec | None:
        """What to register for a recorded registration; ``None`` (reported) if it cannot be
        registered now."""
        name = snapshot.name
        today = self.today.get(name)
        if self.tool_mode == "recorded" and today is None and self.today and \
                name not in self.reported_missing:
            self.reported_missing.add(name)
            self.found.append(Divergence(scope="tool", kind="not_given", subject=name,
                                         recorded=converter.unstructure(snapshot)))
        try:
            if self.tool_mode == "live" or (today is not None and
                                            is_code_tool(today.snapshot())):
                # live tools run; so does a given code tool in a recorded replay: it runs the
                # recorded program again, its calls answered from the log (docs/codemode.md)
                assert today is not None  # checked when the replay began
                spec = today
            else:
                spec = self.stubs.body_for(today if today is not None else ToolSpec(
                    name=snapshot.name, description=snapshot.description,
                    input_schema=snapshot.input_schema, output_schema=snapshot.output_schema,
                    annotations=snapshot.annotations, exposure=snapshot.exposure,
                    execution_mode=snapshot.execution_mode, timeout=snapshot.timeout,
                    model_view=snapshot.model_view,
                    execute=self.stubs.execute,
                ))
            Registry().check(spec)
        except Exception as exc:
            self.found.append(Divergence(scope="tool", kind="error", subject=name,
                                         recorded=converter.unstructure(snapshot),
                                         now=f"cannot be registered now: {exc}"))
            return None
        self.timeouts[name] = spec.timeout
        self.modes[name] = spec.execution_mode
        return spec

    def concurrent(self, turn: int) -> bool:
        """Whether the batch of ``turn`` runs its calls at once with today's declarations:
        decided as the engine decides it (:func:`~engine.core.tools.runs_in_order`), over the calls
        the log shows running (a call the gate stopped never ran, so a ``sequential`` tool
        refused does not make its siblings wait for each other)."""
        ran = [call for call in self.book.calls.values()
               if call.parent_id is None and call.started and not from_host(call.call_id)
               and turn_of(call.call_id) == turn]
        return not runs_in_order([self.modes.get(call.name) for call in ran])

    async def apply(self, actions: Sequence[SessionAction]) -> None:
        """Replay session changes: a tool registered, the active tools set or added to, the
        system prompt replaced, a host call asked for (after the host calls of the batches
        before, so that each gets its recorded id)."""
        session = self.session
        assert session is not None
        await self.hosts.caught_up()
        for action in actions:
            if isinstance(action, ToolRegistered):
                spec = self.spec_for(action.spec)
                if spec is not None:
                    await session.register(spec)
            elif isinstance(action, SystemPromptSet):
                await session.set_system_prompt(action.text)
            elif isinstance(action, ActiveToolsSet):
                try:
                    await session.set_active_tools(action.names)
                except ValueError as exc:
                    self.found.append(Divergence(scope="session", kind="error",
                                                 subject="set_active_tools", now=str(exc)))
            elif isinstance(action, ToolsActivated):
                try:
                    await session.activate(action.names)
                except ValueError as exc:
                    self.found.append(Divergence(scope="session", kind="error",
                                                 subject="activate", now=str(exc)))
            else:  # a host call: it runs beside what follows, as it did
                await self.hosts.ask(action)

    async def before_turn(self, turn: RecordedTurn) -> None:
        await self.apply(turn.before)
        self.hosts.during(turn)
        if self.progress is not None:
            self.progress(turn.seq, len(self.book.records))

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> ReplayReport:
        book = self.book
        store = MemoryStore()
        initial = [s for s in (self.spec_for(snap) for snap in book.initial_tools) if s]
        model = RecordedModel(self.before_turn)
        approver = RecordedApprover(book, self.watch, answer_later=self.hosts.answer_later)
        asker = RecordedAsker(book)
        try:
            async with trio.open_nursery() as hosts, Session.open(
                store, model=model, tools=initial, approver=approver, asker=asker,
                rules=self.rules, session_id=book.session_id, create=True,
                max_turns=book.max_turns, max_depth=self.max_depth, limits=book.limits,
                clock=self.clock, metadata=book.metadata, system_prompt=book.system_prompt,
                model_view=book.model_view,
            ) as session:
                self.session = session
                self.hosts.attach(session, hosts)
                call_handlers = (self.handlers if self.handlers is not None
                                 else recorded_call_handlers(book))
                for handler in call_handlers:
                    session.on_tool_call(handler)
                if book.decision_deps:
                    session.on_tool_call(sequencing_handler(self.watch))
                result_handlers = (self.result_handlers if self.result_handlers is not None
                                   else recorded_result_handlers(book))
                for result_handler in result_handlers:
                    session.on_tool_result(result_handler)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._follow, session)
                    try:
                        await self._prompts(session, model)
                        self.watch.finish()
                        # the host calls the log ended end in the replay before it closes
                        ended = self.hosts.ended()
                        await self.watch.until(lambda: all(map(self.watch.gone, ended)))
                    finally:
                        nursery.cancel_scope.cancel()
        except Exception as exc:
            self.found.append(Divergence(scope="session", kind="error", subject="replay",
                                         now=f"the replay stopped: {_describe(exc)}"))
        if self.progress is not None:
            self.progress(len(book.records), len(book.records))
        replayed = await store.read(book.session_id)
        return draw_up(book, replayed, tool_mode=self.tool_mode, found=self.found,
                       notes=self.notes, verified=self.verified)

    async def _follow(self, session: Session) -> None:
        async for record in session.follow():
            self.watch.see(record)

    async def _prompts(self, session: Session, model: RecordedModel) -> None:
        for prompt in self.book.prompts:
            await self.apply(prompt.before)
            model.begin(prompt)
            result = await self._step(session, lambda: session.prompt(prompt.text))
            while result is not None and result.stop == "paused":
                answers = self._answers_at_pause(result.pending)
                if await self._answer_questions(session, result.questions) and not answers:
                    result = await self._step(session, session.resume)
                    continue
                if not answers:
                    pending = ", ".join([*(r.call_id for r in result.pending),
                                         *(q.question_id for q in result.questions)])
                    self.notes.append(f"the replay ends paused, waiting for approvals or "
                                      f"questions the log never answered: {pending}")
                    await self.apply(self.book.trailing)  # the host may have gone on
                    return
                for call_id in answers:
                    answer = self.book.calls[call_id].answer
                    assert answer is not None
                    await session.resolve_approval(
                        call_id, answer.granted, answer.scope, reason=answer.reason,
                        arguments=answer.arguments if answer.granted else None)
                result = await self._step(session, session.resume)
        await self.apply(self.book.trailing)

    async def _answer_questions(self, session: Session,
                                pending: Sequence[Question]) -> bool:
        """Give the answers the host gave at a pause to the questions pending now; whether
        there were any."""
        given = False
        for question in pending:
            call = self.book.calls.get(question.call_id)
            answer = call.answers.get(question.question_id) if call is not None else None
            if answer is not None and answer.later:
                await session.answer_question(question.question_id, answer.action,
                                              answer.content, reason=answer.reason)
                given = True
        return given

    def _answers_at_pause(self, pending: Sequence[ApprovalRequest]) -> list[str]:
        """The pending calls the host answered together at the next recorded pause."""
        answered = sorted(
            ((call.answer.seq, call.answer.group, call.call_id) for request in pending
             if (call := self.book.calls.get(request.call_id)) is not None
             and call.answer is not None and not from_host(call.call_id)),
        )
        if not answered:
            return []
        group = answered[0][1]
        return [call_id for _, g, call_id in answered if g == group]

    async def _step(
        self, session: Session, step: Callable[[], Any]
    ) -> PromptResult | None:
        """Run a prompt or a resume; stop it where the host stopped the recorded one.
        ``None`` if it was stopped or ran out of recorded turns."""
        result: PromptResult | None = None
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_when_due, session, scope)
                try:
                    result = await step()
                except RecordedTurnsEnded:
                    result = None
                nursery.cancel_scope.cancel()
        return result

    def _waiters_now(self, session: Session) -> tuple[Waiter, ...]:
        waiters = self.book.host_waiters(session.state.turn)
        if self.tool_mode == "live":  # live bodies run as they do; only approvals can wait
            waiters = tuple(w for w in waiters if w.kind == "approval")
        return waiters

    async def _stop_when_due(self, session: Session, scope: trio.CancelScope) -> None:
        def due() -> bool:
            turn = session.state.turn
            return self.watch.stop_due(self._waiters_now(session), self.book.ended(turn))

        await self.watch.until(due)
        scope.cancel()


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
