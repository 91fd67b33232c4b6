"""The property of typed tools, over signatures Hypothesis writes: for any function built from a
small grammar of the supported types (scalars, Literal, Enum, constrained values, lists,
tuples, dicts, unions, attrs classes, dataclasses, TypedDicts, a class that contains itself,
nested), ``@tool`` infers a schema the engine accepts; every argument that schema admits
(drawn from it by engine.testing) is structured into the declared types, checked value by
value, and returns through the output schema; every argument it refuses ends the call
``invalid_arguments`` without running the body, and the log keeps every invariant."""

from __future__ import annotations

import dataclasses
import enum
import inspect
import itertools
import typing
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import attrs
import trio
from hypothesis import assume, given
from hypothesis import strategies as st

from engine import Annotations, Param, Session, approve_all, tool
from engine.core.schemas.checking import compile_schema
from engine.core.typed.classes import class_kind, fields_of
from engine.models import FauxModel, FauxToolCall, faux_text
from engine.testing import BodyRuns, check_session, counted, invalid_arguments, valid_arguments
from events import MemoryStore
from events.types import ToolCallFailed
from tests.strategies import PROPERTY

_names = itertools.count()  # class names: a name is no data, so it is not drawn


def _name(prefix: str) -> str:
    return f"{prefix}{next(_names)}"


# -- the grammar --------------------------------------------------------------------------------

SCALARS = st.sampled_from([int, float, str, bool, type(None), Any])
LITERALS = st.one_of(
    st.lists(st.integers(-3, 3), min_size=1, max_size=3, unique=True),
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True),
).map(lambda values: Literal[tuple(values)])
ENUMS = st.one_of(
    st.lists(st.sampled_from(["red", "green", "blue"]), min_size=1, max_size=3, unique=True),
    st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True),
).map(lambda values: enum.Enum(_name("E"), {f"M{i}": v for i, v in enumerate(values)}))


@st.composite
def constrained(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["int", "float", "str", "list"]))
    if kind == "int":
        low = draw(st.integers(-50, 50))
        return Annotated[int, Param(ge=low, le=low + draw(st.integers(0, 20)))]
    if kind == "float":
        return Annotated[float, Param(gt=draw(st.integers(-5, 5)))]
    shortest = draw(st.integers(0, 3))
    longest = shortest + draw(st.integers(0, 3))
    if kind == "str":
        return Annotated[str, Param("some text", min_length=shortest, max_length=longest)]
    return Annotated[list[int], Param(min_length=shortest, max_length=longest)]


LEAVES = st.one_of(SCALARS, LITERALS, ENUMS, constrained())


def _optional(tp: Any) -> bool:
    """Whether ``None`` is a value of ``tp``."""
    if tp is Any or tp is type(None):
        return True
    union = typing.get_origin(tp) in (Union, type(int | str))
    return union and any(_optional(member) for member in typing.get_args(tp))


@st.composite
def attrs_class(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> Any:
    types = draw(st.lists(children, min_size=1, max_size=3))
    fields = {f"f{i}": attrs.field(type=tp, default=None) if _optional(tp) and draw(st.booleans())
              else attrs.field(type=tp) for i, tp in enumerate(types)}
    ordered = dict(sorted(fields.items(), key=lambda item: item[1]._default is not attrs.NOTHING))
    return attrs.make_class(_name("A"), ordered, frozen=True)


@st.composite
def dataclass(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> Any:
    types = draw(st.lists(children, min_size=1, max_size=3))
    plain = [(f"f{i}", tp) for i, tp in enumerate(types) if not _optional(tp)]
    optional = [(f"f{i}", tp, dataclasses.field(default=None))
                for i, tp in enumerate(types) if _optional(tp)]
    return dataclasses.make_dataclass(_name("D"), [*plain, *optional])


@st.composite
def typed_dict(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> Any:
    types = draw(st.lists(children, min_size=1, max_size=3))
    return TypedDict(_name("T"), {f"k{i}": tp for i, tp in enumerate(types)},  # type: ignore[operator]
                     total=draw(st.booleans()))


def recursive_class(value: Any) -> Any:
    """A class that contains itself: a value and a list of more of it."""
    name = _name("R")
    cls = attrs.make_class(name, {"value": attrs.field(type=value),
                                  "more": attrs.field(type=f"list[{name}]",
                                                      factory=list)}, frozen=True)
    return attrs.resolve_types(cls, localns={name: cls})


def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        children.map(lambda tp: list[tp]),  # type: ignore[valid-type]
        children.map(lambda tp: tuple[tp, ...]),  # type: ignore[valid-type]
        st.tuples(children, children).map(lambda pair: tuple[pair]),  # type: ignore[valid-type]
        children.map(lambda tp: dict[str, tp]),  # type: ignore[valid-type]
        children.map(lambda tp: Optional[tp]),  # noqa: UP045
        st.tuples(children, children).map(lambda pair: Union[pair]),  # noqa: UP007
        attrs_class(children),
        dataclass(children),
        typed_dict(children),
        children.map(recursive_class),
    )


TYPES = st.recursive(LEAVES, extend, max_leaves=6)


@attrs.frozen
class Made:
    """A drawn tool (counted in ``runs``), its parameters' types, and the arguments each run
    of its function received."""

    spec: Any
    types: list[Any]
    runs: BodyRuns
    received: list[Any]

    def __repr__(self) -> str:
        return f"<tool {inspect.signature(self.spec.function)}>"


@st.composite
def typed_functions(draw: st.DrawFn) -> Made:
    """A typed tool whose function returns its first argument as its first parameter's type,
    and the structured arguments each run received (as a list, filled when it runs)."""
    types = draw(st.lists(TYPES, max_size=3))
    received: list[Any] = []
    parameters = [inspect.Parameter(
        f"p{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=tp,
        default=None if _optional(tp) and draw(st.booleans()) else inspect.Parameter.empty)
        for i, tp in enumerate(types)]
    parameters.sort(key=lambda p: p.default is not inspect.Parameter.empty)
    returns = parameters[0].annotation if parameters else None

    def body(**arguments: Any) -> Any:
        received.append(arguments)
        return arguments.get(parameters[0].name) if parameters else None

    if draw(st.booleans()):
        function: Any = body
    else:
        async def function(**arguments: Any) -> Any:
            return body(**arguments)

    function.__signature__ = inspect.Signature(parameters, return_annotation=returns)
    function.__name__ = "probe"
    function.__doc__ = "A tool Hypothesis wrote."
    runs = BodyRuns()
    spec = counted(tool(annotations=Annotations(read_only=True))(function), runs)
    return Made(spec=spec, types=types, runs=runs, received=received)


# -- values of a type, checked ------------------------------------------------------------------

def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` is a value of ``tp``, all the way down (and within its Param's
    bounds)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        inner, meta = args[0], [m for m in tp.__metadata__ if isinstance(m, Param)]
        if not conforms(value, inner):
            return False
        for param in meta:
            size = len(value) if isinstance(value, (str, list)) else None
            if (param.ge is not None and value < param.ge or param.le is not None and value > param.le
                    or param.gt is not None and value <= param.gt
                    or param.min_length is not None and size is not None and size < param.min_length
                    or param.max_length is not None and size is not None and size > param.max_length):
                return False
        return True
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    if tp in (int, float, str, bool):
        return type(value) is tp
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return isinstance(value, tp)
    if origin in (Union, type(int | str)):
        return any(conforms(value, member) for member in args)
    if origin is list:
        return type(value) is list and all(conforms(v, args[0]) for v in value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return type(value) is tuple and all(conforms(v, args[0]) for v in value)
        return type(value) is tuple and len(value) == len(args) and all(
            conforms(v, a) for v, a in zip(value, args))
    if origin is dict:
        return type(value) is dict and all(
            type(k) is str and conforms(v, args[1]) for k, v in value.items())
    kind = class_kind(tp)
    if kind == "typeddict":
        fields = {f.key: f for f in fields_of(tp)}
        return type(value) is dict and set(value) <= set(fields) and all(
            k in value for k, f in fields.items() if f.required) and all(
            conforms(v, fields[k].type) for k, v in value.items())
    if kind is not None:
        return type(value) is tp and all(conforms(getattr(value, f.attribute), f.type)
                                         for f in fields_of(tp))
    raise AssertionError(f"the grammar made a type the check does not know: {tp!r}")


def small_numbers(value: Any) -> bool:
    """Every number of a JSON value fits a double (one that does not is refused by a float
    parameter, as tests/core/test_typed_signatures.py shows)."""
    if isinstance(value, dict):
        return all(small_numbers(v) for v in value.values())
    if isinstance(value, list):
        return all(small_numbers(v) for v in value)
    return not isinstance(value, int) or abs(value) < 2**53


# -- the property -------------------------------------------------------------------------------

async def call_once(spec: Any, runs: BodyRuns, arguments: Any) -> Any:
    store = MemoryStore()
    model = FauxModel([FauxToolCall(name=spec.name, arguments=arguments), faux_text("done")])
    async with Session.open(store, model=model, tools=[spec], approver=approve_all) as session:
        await session.prompt("go")
        await check_session(session, store, body_runs=runs, closed=True)
    return session.calls["1.0"]


@PROPERTY
@given(typed_functions(), st.data())
def test_any_signature_takes_what_its_schema_admits_and_refuses_the_rest(
    made: Made, data: st.DataObject
) -> None:
    spec, types, runs, received = made.spec, made.types, made.runs, made.received
    validator = compile_schema(spec.input_schema)
    if spec.output_schema is not None:
        compile_schema(spec.output_schema, role="output")
    good = data.draw(valid_arguments(spec.input_schema), label="valid arguments")
    assume(small_numbers(good))
    assert validator.violation(good) is None

    call = trio.run(call_once, spec, runs, good)
    assert call.status == "completed", call.terminal
    [taken] = received
    for index, tp in enumerate(types):
        name = f"p{index}"
        if name in taken:
            assert conforms(taken[name], tp), (name, tp, taken[name])

    try:
        bad = data.draw(invalid_arguments(spec.input_schema), label="invalid arguments")
    except ValueError:  # a schema every value fits: no invalid arguments to draw
        return
    assert validator.violation(bad) is not None
    refused = trio.run(call_once, spec, BodyRuns(), bad)
    assert isinstance(refused.terminal, ToolCallFailed), refused.terminal
    assert refused.terminal.kind == "invalid_arguments"
    assert len(received) == 1  # the body did not run again
