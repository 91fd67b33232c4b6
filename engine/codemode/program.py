"""One program, run to its end: every tool it calls is a nested call of the code tool's call.

The sandbox stops the program at each call of a tool's function (:mod:`.sandbox`). A plain call
(``read(path=...)``) is made at once with ``ctx.execute_tool`` and the program resumed with its
answer. An awaitable twin (``read_async(...)``) is started in a task of its own, its request
recorded before the next one's (so the log holds a ``gather``'s calls in source order, as it
holds a batch's), and the program resumed with a pending future; when the program waits for
futures, it is resumed once all of them have their answers (so what it does next does not
depend on which call finished first, and a run again does the same).

An answer is the tool's structured content when it declares an output schema, else its text.
A failure is an exception raised in the program: ``PermissionError`` for a call that was
denied or blocked, ``RuntimeError`` for any other. Every exit (the program's end, its failure,
a limit, the call's cancellation) first cancels the calls still running, which records them
as cancelled: the log never holds an open call of a finished program.

In a session that may pause, a call that waits for a person's approval is not waited for
here: it is *held*. Once every call the program waits for has its answer or is held, and no
call of it runs, the program is dumped and its state recorded (``program_suspended``,
:mod:`.state`), the sandbox released, and the body stops (``BodySuspended``); the body run
again goes on from the latest state, each held call taken up by its id from where the log
says it is (docs/codemode.md, "Pause and resume").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from events.types import ProgramSuspended

from ..core.codemode import ProgramFunction
from ..core.errors import ProgramStateRefused
from ..core.toolcontext import BodySuspended, CallOutcome, ToolContext
from ..runtime.context import CallContext
from .limits import CodeLimits
from .sandbox import Printed, Sandbox
from .state import program_state, sandbox_version, state_bytes

__all__ = ["ProgramEnd", "run_program"]

_REFUSED = {"denied": "PermissionError", "blocked": "PermissionError"}


@attrs.frozen(kw_only=True)
class ProgramEnd:
    """How a program ended: its printed output, and either the value of its last expression
    (``value``, as JSON, or its ``repr`` when it is not JSON) or what stopped it (``error``:
    ``"syntax"``, ``"raised"`` (limits included), ``"crashed"``, or ``"refused"``: its
    recorded state was not the one recorded; ``message`` says it)."""

    printed: str
    value: Any = None
    error: str | None = None
    message: str = ""


class _Pending:
    """A call the program made whose answer it has not been given yet: the engine's id once
    requested, then its answer, or ``held`` while it waits for a person."""

    def __init__(self, function: ProgramFunction | None, call_id: str | None = None) -> None:
        self.function = function
        self.call_id = call_id
        self.answer: dict[str, Any] | None = None
        self.held = False


async def run_program(source: str, ctx: ToolContext, functions: Mapping[str, ProgramFunction],
                      limits: CodeLimits) -> ProgramEnd:
    """Run ``source`` with ``functions`` callable, under ``limits``; never raises for the
    program's failures (a cancellation propagates, with the running calls cancelled).

    A program that waits only for calls that wait for a person stops with its state recorded
    (:class:`~engine.core.toolcontext.BodySuspended` is raised, once its sandbox is released);
    run again, it goes on from the latest state recorded (docs/codemode.md)."""
    printed = Printed(limits.output)
    run = _Run(ctx, functions, printed)
    async with Sandbox(limits) as box:
        m = box.module
        async with trio.open_nursery() as nursery:
            try:
                value = await run.drive(box, source, nursery)
            except m.MontyError as exc:
                run.close_held()
                return _failed(m, exc, printed.text)
            except ProgramStateRefused as exc:
                return ProgramEnd(printed=printed.text, error="refused", message=str(exc))
            finally:
                nursery.cancel_scope.cancel()  # calls the program did not wait for
        if not run.suspended:
            run.close_held()
    if run.suspended:
        raise BodySuspended(f"the program of call {ctx.call_id} waits for a person")
    return ProgramEnd(printed=printed.text, value=_shown(value, limits.result))


class _Run:
    """One run of a program: its calls without an answer yet (by the sandbox's ids), and
    whether it stopped with its state recorded."""

    def __init__(self, ctx: ToolContext, functions: Mapping[str, ProgramFunction],
                 printed: Printed) -> None:
        self.ctx = ctx
        self.functions = functions
        self.printed = printed
        #: the runtime's ctx: the program goes on from a recorded state if its call has one
        self.live: CallContext | None = ctx if isinstance(ctx, CallContext) else None
        #: a model's call, in a session that may pause: the program may stop with its state
        #: recorded (else a call waiting for a person is waited for here)
        self.hold = self.live is not None and self.live.may_suspend
        self.pending: dict[int, _Pending] = {}
        self.suspended = False
        self._change = trio.Event()
        self._nursery: trio.Nursery | None = None

    async def drive(self, box: Sandbox, source: str, nursery: trio.Nursery) -> Any:
        m = box.module
        self._nursery = nursery
        recorded = self.live.last_suspension() if self.live is not None else None
        if recorded is None:
            snapshot = await box.step(box.session.feed_start, source,
                                      print_callback=self.printed)
        else:
            snapshot = await self._load(box, nursery, *recorded)
        while not isinstance(snapshot, m.MontyComplete):
            if isinstance(snapshot, m.FutureSnapshot):
                ids = list(snapshot.pending_call_ids)
                answers = await self._answers(ids)
                if answers is None:
                    return await self._suspend(box, snapshot)
                snapshot = await box.step(snapshot.resume, answers)
            elif isinstance(snapshot, m.NameLookupSnapshot):
                snapshot = await box.step(snapshot.resume)  # an unknown name: NameError
            elif snapshot.is_os_function:
                snapshot = await box.step(snapshot.resume_not_handled)  # no OS access at all
            elif snapshot.call_id in self.pending:  # a call of a recorded state, announced
                answers = await self._answers([snapshot.call_id])
                if answers is None:
                    return await self._suspend(box, snapshot)
                snapshot = await box.step(snapshot.resume, answers[snapshot.call_id])
            else:
                function = self.functions.get(snapshot.function_name)
                arguments, refused = _arguments(snapshot.function_name, function,
                                                snapshot.args, snapshot.kwargs)
                answer: dict[str, Any] | None
                if refused is not None:
                    answer = refused
                else:
                    assert function is not None and arguments is not None
                    waiting = self.pending[snapshot.call_id] = _Pending(function)
                    if function.is_async:
                        await nursery.start(self._call, waiting, arguments)
                        answer = {"future": ...}
                    else:
                        await self._call(waiting, arguments)
                        answers = await self._answers([snapshot.call_id])
                        if answers is None:
                            return await self._suspend(box, snapshot)
                        answer = answers[snapshot.call_id]
                snapshot = await box.step(snapshot.resume, answer)
        return snapshot.output

    async def _call(self, waiting: _Pending, arguments: dict[str, Any] | None, *,
                    task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Make the call (``arguments``), or go on with the recorded one (``None``); its
        answer, or ``held`` while it waits for a person."""
        task_status.started()  # the request is recorded before this task first waits
        live, outcome = self.live, None
        if waiting.call_id is not None:
            assert live is not None
            outcome = await live.continue_nested(waiting.call_id, hold=self.hold)
        else:
            assert waiting.function is not None and arguments is not None
            tool = waiting.function.stub.tool
            if live is not None:
                waiting.call_id, outcome = await live.nested_call(tool, arguments,
                                                                  hold=self.hold)
            else:
                outcome = await self.ctx.execute_tool(tool, arguments)
                waiting.call_id = outcome.call_id
        if outcome is None:
            waiting.held = True
        else:
            waiting.answer = _answer(waiting.function, outcome)
        self._change.set()

    async def _answers(self, ids: list[int]) -> dict[int, dict[str, Any]] | None:
        """The answers to the calls ``ids`` once all have one, or ``None`` once the program
        can only wait for a person: one of them waits for a person's answer and no call of
        the program runs."""
        pending = self.pending
        while True:
            if all(pending[i].answer is not None for i in ids):
                return {i: _given(pending.pop(i)) for i in ids}
            if self.hold and any(pending[i].held for i in ids) and all(
                    p.held or p.answer is not None for p in pending.values()):
                assert self.live is not None and self._nursery is not None
                # answered meanwhile (the host saw it pending while other calls ran): it goes on
                answered = [p for p in pending.values()
                            if p.held and not self.live.awaits_approval(str(p.call_id))]
                if not answered:
                    return None
                for waiting in answered:
                    waiting.held = False
                    await self._nursery.start(self._call, waiting, None)
                continue
            self._change = trio.Event()
            await self._change.wait()

    async def _suspend(self, box: Sandbox, snapshot: Any) -> None:
        """Dump the stopped program and record its state; the sandbox is released next."""
        assert self.live is not None
        data = await box.step(snapshot.dump)
        calls = [(sid, p.call_id) for sid, p in self.pending.items() if p.call_id is not None]
        await self.live.suspend(program_state(
            self.live.call_id, calls, data, release=sandbox_version(box.module),
            printed=self.printed.kept, printed_cut=self.printed.dropped))
        self.suspended = True

    async def _load(self, box: Sandbox, nursery: trio.Nursery, event: ProgramSuspended,
                    before: tuple[str, ...], names: Mapping[str, str]) -> Any:
        """Go on from a recorded state: checked, loaded into this fresh sandbox, and each
        call it waits for taken up by its id (answered from the log if it ended, run now if
        it was granted, held again if it still waits)."""
        assert self.live is not None
        data = state_bytes(event, sandbox_version(box.module))  # or ProgramStateRefused
        self.printed.restore(event.printed, event.printed_cut)
        self.live.go_on_from(before)
        snapshot = await box.step(box.session.load_snapshot, data, print_callback=self.printed)
        for sid, call_id in zip(event.program_calls, event.waits_for, strict=True):
            function = next((f for f in self.functions.values()
                             if f.stub.tool == names[call_id]), None)
            waiting = self.pending[sid] = _Pending(function, call_id)
            await nursery.start(self._call, waiting, None)
        return snapshot

    def close_held(self) -> None:
        """The program ended: calls it made that wait for a person end as cancelled."""
        if self.live is not None:
            for waiting in self.pending.values():
                if waiting.held and waiting.call_id is not None:
                    self.live.close_nested(waiting.call_id, "the program ended without them")


def _failed(m: Any, exc: Exception, printed: str) -> ProgramEnd:
    """How a program that did not end by itself ended, from the sandbox's error."""
    if isinstance(exc, m.MontySyntaxError):
        return ProgramEnd(printed=printed, error="syntax", message=exc.display())
    if isinstance(exc, m.MontyCrashedError):
        why = "it ran out of time" if exc.timed_out else f"its worker stopped ({exc})"
        return ProgramEnd(printed=printed, error="crashed",
                          message=f"the program was stopped: {why}")
    shown = exc.display() if isinstance(exc, m.MontyRuntimeError) else str(exc)
    return ProgramEnd(printed=printed, error="raised", message=shown)


def _given(waiting: _Pending) -> dict[str, Any]:
    assert waiting.answer is not None
    return waiting.answer


def _arguments(name: str, function: ProgramFunction | None, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The tool's arguments for a call of its function (positional ones by the stub's
    order), or the exception the program gets instead (``{"exc_type": ..., "message": ...}``):
    no call is made then."""
    if function is None:
        return None, {"exc_type": "NameError", "message": f"name {name!r} is not defined: the "
                      "tools a program may call are the functions the code tool lists"}
    names = function.stub.parameters
    if len(args) > len(names):
        return None, {"exc_type": "TypeError",
                      "message": f"{name}() takes {len(names)} positional arguments but "
                                 f"{len(args)} were given"}
    arguments = dict(zip(names, args, strict=False))
    if twice := sorted(set(arguments) & set(kwargs)):
        return None, {"exc_type": "TypeError",
                      "message": f"{name}() got multiple values for argument {twice[0]!r}"}
    arguments.update(kwargs)
    return arguments, None


def _answer(function: ProgramFunction | None, outcome: CallOutcome) -> dict[str, Any]:
    """What the program gets for a call: its value, or an exception to raise. (A call of a
    recorded state whose tool is no longer a function of the program is answered by its
    result alone.)"""
    result = outcome.result
    if result.is_error:
        return {"exc_type": _REFUSED.get(outcome.status, "RuntimeError"),
                "message": result.text or "the call failed"}
    if function is None:
        structured = result.structured_content
        return {"return_value": result.text if structured is None else structured}
    if function.stub.wrapped and isinstance(result.structured_content, dict):
        return {"return_value": result.structured_content.get("result")}
    if function.stub.structured:
        return {"return_value": result.structured_content}
    return {"return_value": result.text}


def _shown(value: Any, limit: int) -> Any:
    """The program's value as JSON, or its ``repr`` when it is not JSON; cut to ``limit``
    characters (then as text)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        value = text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]} [... {len(text) - limit} more characters were cut]"
    return value
