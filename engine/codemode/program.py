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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from ..core.codemode import ProgramFunction
from ..core.toolcontext import CallOutcome, ToolContext
from .limits import CodeLimits
from .sandbox import Printed, Sandbox

__all__ = ["ProgramEnd", "run_program"]

_REFUSED = {"denied": "PermissionError", "blocked": "PermissionError"}


@attrs.frozen(kw_only=True)
class ProgramEnd:
    """How a program ended: its printed output, and either the value of its last expression
    (``value``, as JSON, or its ``repr`` when it is not JSON) or what stopped it (``error``:
    ``"syntax"``, ``"raised"`` (limits included) or ``"crashed"``; ``message`` says it)."""

    printed: str
    value: Any = None
    error: str | None = None
    message: str = ""


class _Pending:
    """An awaitable twin's call, started in its own task: its answer once it has one."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.answer: dict[str, Any] = {}


async def run_program(source: str, ctx: ToolContext, functions: Mapping[str, ProgramFunction],
                      limits: CodeLimits) -> ProgramEnd:
    """Run ``source`` with ``functions`` callable, under ``limits``; never raises for the
    program's failures (a cancellation propagates, with the running calls cancelled)."""
    printed = Printed(limits.output)
    async with Sandbox(limits) as box:
        m = box.module
        async with trio.open_nursery() as nursery:
            try:
                value = await _drive(box, source, ctx, functions, printed, nursery)
            except m.MontyError as exc:
                return _failed(m, exc, printed.text)
            finally:
                nursery.cancel_scope.cancel()  # calls the program did not wait for
    return ProgramEnd(printed=printed.text, value=_shown(value, limits.result))


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


async def _drive(box: Sandbox, source: str, ctx: ToolContext,
                 functions: Mapping[str, ProgramFunction], printed: Printed,
                 nursery: trio.Nursery) -> Any:
    m = box.module
    pending: dict[int, _Pending] = {}
    snapshot = await box.step(box.session.feed_start, source, print_callback=printed)
    while not isinstance(snapshot, m.MontyComplete):
        if isinstance(snapshot, m.FutureSnapshot):
            ids = list(snapshot.pending_call_ids)
            for call in ids:
                await pending[call].done.wait()
            snapshot = await box.step(snapshot.resume, {i: pending.pop(i).answer for i in ids})
        elif isinstance(snapshot, m.NameLookupSnapshot):
            snapshot = await box.step(snapshot.resume)  # an unknown name: NameError
        elif snapshot.is_os_function:
            snapshot = await box.step(snapshot.resume_not_handled)  # no OS access at all
        else:
            function = functions.get(snapshot.function_name)
            arguments, refused = _arguments(snapshot.function_name, function, snapshot.args,
                                            snapshot.kwargs)
            answer: dict[str, Any]
            if refused is not None:
                answer = refused
            else:
                assert function is not None and arguments is not None
                if function.is_async:
                    waiting = _Pending()
                    pending[snapshot.call_id] = waiting
                    await nursery.start(_call_later, ctx, function, arguments, waiting)
                    answer = {"future": ...}
                else:
                    answer = _answer(function, await ctx.execute_tool(function.stub.tool,
                                                                      arguments))
            snapshot = await box.step(snapshot.resume, answer)
    return snapshot.output


async def _call_later(ctx: ToolContext, function: ProgramFunction, arguments: dict[str, Any],
                      waiting: _Pending, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()  # the request is recorded before this task first waits
    outcome = await ctx.execute_tool(function.stub.tool, arguments)
    waiting.answer = _answer(function, outcome)
    waiting.done.set()


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


def _answer(function: ProgramFunction, outcome: CallOutcome) -> dict[str, Any]:
    """What the program gets for a call: its value, or an exception to raise."""
    result = outcome.result
    if result.is_error:
        return {"exc_type": _REFUSED.get(outcome.status, "RuntimeError"),
                "message": result.text or f"{function.stub.tool} failed"}
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
