"""Tool specs: what a tool declares, and the ``@tool`` decorator that builds one.

A spec is a frozen value: name, description, JSON Schemas, MCP annotations, exposure,
execution mode, timeout, and the async ``execute(call, ctx)`` that does the work. Nothing here
runs a tool or touches the world; the runtime does. The exposure rules (who may see and call
a tool) are pure functions here too, so the runtime and the docs share one table.

``@tool`` makes a spec of either form of function: a typed function (``async def add(a: int,
b: int) -> int``), whose schemas, argument conversion and result come from its signature
(:mod:`engine.core.typed`), or ``async def execute(call, ctx)`` with schemas written by hand
(:func:`is_call_form` tells them apart).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import FrameType
from typing import Any, Final, overload

import attrs

from events.fast.fastinit import fast_init
from events.results import ModelView, ToolResult
from events.types import Annotations, ExecutionMode, Exposure, Origin, ToolSnapshot, ToolSource

from .cutting import check_view
from .errors import ToolSignatureError
from .jsonvalues import copy_json
from .memo import Memo
from .toolcontext import ToolContext
from .typed import ToolSignature, TypedBody, read_signature

__all__ = [
    "EXPOSURES",
    "ToolCall",
    "ToolSpec",
    "active_on_registration",
    "is_call_form",
    "may_call",
    "tool",
]

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")

#: Exposure modes, in the order of DESIGN's table.
EXPOSURES: tuple[Exposure, ...] = ("direct", "model-only", "codemode", "deferred", "hidden")


@fast_init
@attrs.frozen(kw_only=True)
class ToolCall:
    """One call as a tool body sees it: the engine's id, the final arguments, who asked
    (``origin``: ``"model"``, ``"host"`` or ``"nested"``)."""

    call_id: str
    name: str
    arguments: Any
    origin: Origin = "model"
    parent_id: str | None = None


Execute = Callable[[ToolCall, "ToolContext"], Awaitable[ToolResult]]


def _check_name(_: Any, __: Any, value: str) -> None:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(
            f"tool name {value!r} is invalid: use 1-128 characters of A-Z a-z 0-9 _ . - "
            f"(the MCP rule)"
        )


def _check_view(_: Any, __: Any, value: ModelView | None) -> None:
    check_view(value, "model_view")


def _check_positive(_: Any, __: Any, value: float | None) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {value!r}")


_CHECKS_KEPT: Final = 4


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool: its declaration and the coroutine function that executes it.

    ``input_schema`` must be a JSON Schema object with ``"type": "object"`` at its root;
    ``output_schema``, when given, makes a successful result carry ``structured_content`` that
    validates against it. Schemas are checked when the tool is registered with a session.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    input_schema: Mapping[str, Any]
    execute: Execute = attrs.field(eq=False)
    output_schema: Mapping[str, Any] | None = None
    annotations: Annotations = Annotations()
    exposure: Exposure = attrs.field(default="direct", validator=attrs.validators.in_(EXPOSURES))
    execution_mode: ExecutionMode = attrs.field(
        default="parallel", validator=attrs.validators.in_(("parallel", "sequential"))
    )
    timeout: float | None = attrs.field(default=None, validator=_check_positive)
    #: where the code runs when it is not in this process (a mounted MCP server's tool)
    source: ToolSource | None = None
    #: how much of a result the model reads (docs/tools.md, "Long outputs"); ``None``: the
    #: session's view, or all of it
    model_view: ModelView | None = attrs.field(default=None, validator=_check_view)
    #: what ``@tool`` read from a typed function (``None`` for the ``(call, ctx)`` form): the
    #: registry's input check holds the arguments to its parameters' types too
    #: (:class:`~engine.core.registry.TypedInputs`), as part of input validation
    signature: ToolSignature | None = attrs.field(default=None, eq=False, repr=False)
    #: what checking this spec's schemas gave, by their exact print
    #: (:meth:`engine.core.registry.Registry.check`): the spec's own memo, a few entries, since
    #: a schema changed in place prints anew
    checked: Memo[bytes, Any] = attrs.field(factory=lambda: Memo(_CHECKS_KEPT), init=False,
                                            eq=False, repr=False)

    @property
    def function(self) -> Callable[..., Any]:
        """The function ``@tool`` was given, unchanged, to call directly (in a unit test,
        say): ``add.function(1, 2)``. For the ``(call, ctx)`` form it is :attr:`execute`."""
        return self.signature.function if self.signature is not None else self.execute

    def snapshot(self) -> ToolSnapshot:
        """The spec without its code, as the log records it."""
        # as JSON (tuples become lists), so the log holds what it will read back
        return self.snapshot_of(
            copy_json(self.input_schema),
            None if self.output_schema is None else copy_json(self.output_schema),
        )

    def snapshot_of(
        self, input_schema: dict[str, Any], output_schema: dict[str, Any] | None
    ) -> ToolSnapshot:
        """:meth:`snapshot` with its schemas given: private copies of this spec's, as JSON
        (:meth:`engine.core.registry.Registry.recorded` makes them from the print it checked)."""
        return ToolSnapshot(
            name=self.name,
            description=self.description,
            input_schema=input_schema,
            output_schema=output_schema,
            annotations=self.annotations,
            exposure=self.exposure,
            execution_mode=self.execution_mode,
            timeout=self.timeout,
            source=self.source,
            model_view=self.model_view,
        )


_EMPTY_OBJECT: Mapping[str, Any] = {"type": "object", "properties": {}}
_ANY_NAMES: Final = frozenset({"Any", "typing.Any", "t.Any"})


def is_call_form(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is written in the ``(call, ctx)`` form, the one whose schema is
    given by hand: two parameters, the first annotated ``ToolCall``, or named ``call`` and
    ``ctx`` with no types (or ``Any``; ``ctx`` may be annotated with the context type). Every
    other function is read as a typed tool."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(parameters) != 2 or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            or p.default is not p.empty for p in parameters):
        return False
    first, second = (p.annotation for p in parameters)
    if _names(first, ToolCall):
        return True
    untyped = (inspect.Parameter.empty, Any)
    return [p.name for p in parameters] == ["call", "ctx"] and (
        first in untyped or first in _ANY_NAMES) and (
        second in untyped or second in _ANY_NAMES or _names(second, None))


def _names(annotation: Any, cls: type | None) -> bool:
    """Whether ``annotation`` is ``cls`` (or, for ``None``, the context type or a class built
    on it), also written as a string."""
    if isinstance(annotation, str):
        last = annotation.rpartition(".")[2]
        return last == cls.__name__ if cls is not None else last in ("ToolContext",
                                                                     "CallContext")
    if cls is not None:
        return annotation is cls
    return isinstance(annotation, type) and ToolContext in annotation.__mro__


@overload
def tool(func: Callable[..., Any], /) -> ToolSpec: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    annotations: Annotations = Annotations(),
    exposure: Exposure = "direct",
    execution_mode: ExecutionMode = "parallel",
    timeout: float | None = None,
    model_view: ModelView | None = None,
) -> Callable[[Callable[..., Any]], ToolSpec]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Mapping[str, Any] | None = None,
    output_schema: Mapping[str, Any] | None = None,
    annotations: Annotations = Annotations(),
    exposure: Exposure = "direct",
    execution_mode: ExecutionMode = "parallel",
    timeout: float | None = None,
    model_view: ModelView | None = None,
) -> ToolSpec | Callable[[Callable[..., Any]], ToolSpec]:
    """Make a :class:`ToolSpec` of a typed function, or of an ``async def execute(call,
    ctx)`` with schemas written by hand. Example::

        @tool(annotations=Annotations(read_only=True))
        async def add(a: int, b: int = 0) -> int:
            \"\"\"Add two integers.

            Args:
                a: the first
                b: the second
            \"\"\"
            return a + b

    A typed function's input schema comes from its parameters, its description (unless
    ``description=``) from its docstring, and its output schema (unless ``output_schema=``)
    from its return annotation; a parameter annotated ``ToolContext`` receives the call's
    context; a sync function runs in a worker thread. docs/tools.md lists the types, and
    what the decorator refuses (:class:`~engine.core.errors.ToolSignatureError`, raised
    here, saying what to write instead). ``model_view=ModelView(max_lines=200)`` lets the
    model read only the head and tail of a long result, which is kept whole (docs/tools.md,
    "Long outputs").

    The ``(call, ctx)`` form (:func:`is_call_form`) is for a schema that is given (an MCP
    server's, an OpenAPI operation's): the name defaults to the function's name, the
    description to its docstring, and a tool with no ``input_schema`` takes an empty
    object::

        @tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                            "required": ["path"]},
              annotations=Annotations(read_only=True))
        async def stat_file(call, ctx):
            \"\"\"Size of a file in bytes.\"\"\"
            ...
    """
    # the scope the decorator is used in: a typed function's annotations may name its locals
    scope = inspect.currentframe()
    caller = scope.f_back if scope is not None else None
    del scope

    def build(function: Callable[..., Any], caller: FrameType | None = None) -> ToolSpec:
        if is_call_form(function):
            return _call_form(function)
        where = caller if caller is not None else _caller()
        localns = dict(where.f_locals) if where is not None else None
        del where
        return _typed(function, localns)

    def _call_form(execute: Callable[..., Any]) -> ToolSpec:
        if not inspect.iscoroutinefunction(execute):
            raise TypeError(
                f"tool {getattr(execute, '__name__', execute)!r} must be an async function "
                f"'async def execute(call, ctx)'"
            )
        return ToolSpec(
            name=name or execute.__name__,
            description=description
            if description is not None
            else inspect.cleandoc(execute.__doc__ or ""),
            input_schema=input_schema if input_schema is not None else _EMPTY_OBJECT,
            output_schema=output_schema,
            annotations=annotations,
            exposure=exposure,
            execution_mode=execution_mode,
            timeout=timeout,
            model_view=model_view,
            execute=execute,
        )

    def _typed(function: Callable[..., Any], localns: dict[str, Any] | None) -> ToolSpec:
        tool_name: str = name or str(getattr(function, "__name__", ""))
        _check_name(None, None, tool_name)
        if input_schema is not None:
            raise ToolSignatureError(
                f"tool {tool_name!r}: input_schema= is for the (call, ctx) form; a typed "
                f"function's input schema comes from its parameters (describe them with "
                f"Annotated[T, Param(...)]), or write async def {tool_name}(call, ctx) to "
                f"give the schema by hand")
        signature = read_signature(function, name=tool_name, localns=localns)
        return ToolSpec(
            name=tool_name,
            description=description if description is not None else signature.description,
            input_schema=signature.input_schema,
            output_schema=output_schema if output_schema is not None
            else signature.output_schema,
            annotations=annotations,
            exposure=exposure,
            execution_mode=execution_mode,
            timeout=timeout,
            model_view=model_view,
            execute=TypedBody(signature),
            signature=signature,
        )

    if func is not None:
        spec = build(func, caller)
        del caller
        return spec
    del caller
    return build


def _caller() -> FrameType | None:
    """The frame that applied ``@tool(...)``'s decorator: two up from here."""
    frame = inspect.currentframe()
    try:
        return frame.f_back.f_back if frame is not None and frame.f_back is not None else None
    finally:
        del frame


def active_on_registration(exposure: Exposure) -> bool:
    """Direct and model-only tools are active once registered; the rest wait to be activated
    (``set_active_tools``, ``activate``; codemode and deferred ones also by a tool, such as
    the search tool)."""
    return exposure in ("direct", "model-only")


def runs_in_order(modes: Sequence[ExecutionMode | None]) -> bool:
    """Whether the calls of a batch that are allowed to run (their tools' execution modes,
    ``None`` for a tool no longer registered) run one after another in one task: a
    ``sequential`` tool among several makes the whole batch sequential. The calls the gate
    stopped do not count: they never run. The engine and the replay both decide it here."""
    return len(modes) > 1 and "sequential" in modes


def may_call(exposure: Exposure, active: bool, origin: Origin) -> bool:
    """Whether a caller of ``origin`` may call a tool with this exposure (DESIGN's table).

    The model may call what is active (hidden tools too, once the host activated them). The
    host may call what the model may call now, and codemode and deferred tools at any time:
    they wait to be activated for the model's sake (what its context holds), and the host is
    who activates them. A nested call may call a direct tool while it is active, never a
    model-only one, and always a codemode, deferred or hidden one.
    """
    if origin == "nested":
        return active if exposure == "direct" else exposure != "model-only"
    if origin == "host" and exposure in ("codemode", "deferred"):
        return True
    return active
