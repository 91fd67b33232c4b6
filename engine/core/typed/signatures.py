"""A typed function read as a tool: its parameters, its context parameter, its return value.

:func:`read_signature` turns ``async def add(a: int, b: int = 0) -> int`` into a
:class:`ToolSignature`: the input schema of its parameters (:mod:`.schemas`), the
description and the parameters' descriptions from its docstring (:mod:`.docstrings`), the
hooks that structure each argument (:mod:`.conversion`), and what its return value becomes
(:mod:`.results`). Whatever it cannot make a tool of raises
:class:`~engine.core.errors.ToolSignatureError` here, where the function is decorated, saying
what to write instead. Pure.

A parameter annotated with the context type (:class:`~engine.core.toolcontext.ToolContext`,
or a class built on it such as the runtime's ``CallContext``) receives the call's context,
whatever its name, and is not in the schema. A sync function is ``blocking``: the engine runs
it in a worker thread (the context is not given to it there, so a sync function may not take
one).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from events.results import ToolResult

from ..errors import ToolSignatureError
from ..toolcontext import ToolContext
from .classes import resolve_hints
from .conversion import explain, structure_hook
from .docstrings import read_docstring
from .results import Returns, read_returns
from .schemas import TypeSchemas, json_default

__all__ = ["ArgumentsError", "Parameter", "ToolSignature", "read_signature"]

_EMPTY: Any = inspect.Parameter.empty


class ArgumentsError(ValueError):
    """Arguments the input schema let through and the parameters' types cannot hold; the
    message names the path (``... @ $.points[0].x``)."""


@attrs.frozen(eq=False)
class Parameter:
    """One parameter the model fills: its ``name`` (the argument's key), whether it is
    ``positional`` only, its annotated ``type``, its ``default`` (``inspect.Parameter.empty``
    for a required one) and the hook that structures its JSON value."""

    name: str
    positional: bool
    type: Any
    default: Any
    structure: Callable[[Any], Any] = attrs.field(repr=False)


@attrs.frozen(eq=False)
class ToolSignature:
    """What ``@tool`` read from a typed function (:func:`read_signature`).

    ``function`` is the function as written; ``blocking`` says it is sync (a worker thread
    runs it); ``context`` names the parameter that receives the call's context (``None``:
    none does); ``positional`` names the positional-only parameters in order (the context's
    too, if it is one)."""

    function: Callable[..., Any]
    blocking: bool
    parameters: tuple[Parameter, ...]
    context: str | None
    positional: tuple[str, ...]
    description: str
    input_schema: dict[str, Any]
    returns: Returns

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The output schema the return annotation declares, if any."""
        return self.returns.output_schema

    def structured(self, arguments: Any) -> dict[str, Any]:
        """Each given argument structured into its parameter's type, by name; raises
        :class:`ArgumentsError` for one its type cannot hold."""
        if not isinstance(arguments, dict):
            raise ArgumentsError(f"the arguments are an object of named values, not "
                                 f"{type(arguments).__name__}")
        taken: dict[str, Any] = {}
        for parameter in self.parameters:
            name = parameter.name
            if name in arguments:
                try:
                    taken[name] = parameter.structure(arguments[name])
                except Exception as exc:
                    raise ArgumentsError(explain(exc, f"$.{name}")) from None
        return taken

    def problem(self, arguments: Any) -> str | None:
        """Why the parameters' types cannot hold ``arguments`` (which the input schema
        accepted), or ``None``: the gate's check, before the tool may run."""
        try:
            self.structured(arguments)
        except ArgumentsError as exc:
            return str(exc)
        return None

    def bind(self, arguments: Any, ctx: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments to call :attr:`function` with."""
        kwargs = self.structured(arguments)
        if self.context is not None:
            kwargs[self.context] = ctx
        if not self.positional:
            return [], kwargs
        defaults = {p.name: p.default for p in self.parameters}
        # a positional-only default left out before a given one is passed as it is
        args = [kwargs.pop(name) if name in kwargs else defaults[name] for name in self.positional]
        return args, kwargs

    def result(self, returned: Any) -> ToolResult:
        """The result of a call whose function returned ``returned``."""
        return self.returns.result(returned)


def _is_context(annotation: Any) -> bool:
    return isinstance(annotation, type) and ToolContext in annotation.__mro__


def read_signature(function: Callable[..., Any], *, name: str,
                   localns: Mapping[str, Any] | None = None) -> ToolSignature:
    """Read ``function`` as the typed tool ``name`` (see the module); ``localns`` is the
    scope it was decorated in, for names its annotations use that its module does not
    define."""
    where = f"tool {name!r}"
    if inspect.isasyncgenfunction(function) or inspect.isgeneratorfunction(function):
        raise ToolSignatureError(f"{where}: a generator cannot be a tool: return the values "
                                 f"(a list, say) instead of yielding them")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise ToolSignatureError(f"{where}: its signature cannot be read ({exc})") from None
    blocking = not (inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)))
    hints: dict[str, Any] | None = None
    if any(isinstance(p.annotation, str) for p in signature.parameters.values()) or isinstance(
            signature.return_annotation, str):
        hints = resolve_hints(function, localns, where)
    doc = read_docstring(inspect.getdoc(function))
    schemas = TypeSchemas(where, localns)
    parameters: list[Parameter] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    context: str | None = None
    order: list[str] = []  # the positional-only parameters, the context's too
    for index, param in enumerate(signature.parameters.values()):
        at = f"parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind == param.VAR_POSITIONAL else "**"
            raise schemas.fail(f"{stars}{param.name}", "a tool's arguments are named: declare "
                               "each one as a parameter of its own (a: int, b: str), or take "
                               "one dict[str, ...] parameter for free-form ones")
        annotation = param.annotation if hints is None else hints.get(param.name, _EMPTY)
        if annotation is _EMPTY:
            if index == 0 and param.name in ("self", "cls"):
                raise schemas.fail(at, "@tool takes a function, and a method's self is not an "
                                   "argument the model can give: decorate a plain function "
                                   "(or a staticmethod)")
            raise schemas.fail(at, f"it has no type: annotate it ({param.name}: str, say), so "
                               f"the model is told what to send; or, to write the schema by "
                               f"hand, use the (call, ctx) form: async def {name}(call, ctx) "
                               f"with @tool(input_schema=...)")
        if _is_context(annotation):
            if context is not None:
                raise schemas.fail(at, f"the context is already given to {context!r}: take "
                                   f"it once")
            if blocking:
                raise schemas.fail(at, "a sync tool runs in a worker thread, where the "
                                   "context cannot be used: make the function async def to "
                                   "take it")
            context = param.name
            if param.kind == param.POSITIONAL_ONLY:
                order.append(param.name)
            continue
        if getattr(annotation, "__name__", None) == "ToolCall" and getattr(
                annotation, "__module__", None) == "engine.core.tools":
            raise schemas.fail(at, f"a ToolCall is given only in the (call, ctx) form: "
                               f"async def {name}(call: ToolCall, ctx: ToolContext) with "
                               f"@tool(input_schema=...), and no other parameters; a typed "
                               f"tool takes its arguments as parameters")
        schema = dict(schemas.schema(annotation, at))
        described = doc.params.get(param.name)
        if described and "description" not in schema:
            schema["description"] = described
        if param.default is _EMPTY:
            required.append(param.name)
        else:
            ok, value = json_default(param.default, annotation)
            if ok:
                schema["default"] = value
        properties[param.name] = schema
        if param.kind == param.POSITIONAL_ONLY:
            order.append(param.name)
        parameters.append(Parameter(name=param.name,
                                    positional=param.kind == param.POSITIONAL_ONLY,
                                    type=annotation, default=param.default,
                                    structure=structure_hook(annotation)))
    returned = signature.return_annotation if hints is None else hints.get("return", _EMPTY)
    return ToolSignature(
        function=function, blocking=blocking, parameters=tuple(parameters), context=context,
        positional=tuple(order), description=doc.description,
        input_schema=schemas.root(properties, required),
        returns=read_returns(returned, TypeSchemas(where, localns)),
    )
