"""fast_init: the hot frozen classes get an ``__init__`` that sets their slots directly, and
must not differ from attrs' own (kept in ``REFERENCE_INITS``) in anything a caller can see."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.core.handlers
import engine.core.tools
import engine.core.views
import engine.models.protocol
import engine.core.toolcontext
import events.callevents
import events.modelturns
import events.sessionevents
import events.types
from events.fast.fastinit import BUILDERS, REFERENCE_INITS, builder, fast_init
from tests.strategies import values_of

MODULES = (events.types, events.callevents, events.sessionevents, events.modelturns,
           engine.core.views, engine.core.tools, engine.models.protocol, engine.core.toolcontext, engine.core.handlers)


def fast_classes() -> list[type]:
    found = []
    for module in MODULES:
        for value in vars(module).values():
            if (isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__
                    and value.__init__.__code__.co_filename.startswith("<fast_init")):
                found.append(value)
    return found


def test_every_class_with_a_fast_init_keeps_attrs_own_as_its_reference() -> None:
    assert set(fast_classes()) == set(REFERENCE_INITS) == set(BUILDERS)


#: Made on every nested call or every turn of the benchmarks' hot figures (dispatch, the agent
#: loop), or built by a reader for every line of a fold (``builder``); docs/performance.md,
#: "Speed behind its seams". A class made once per session or on a rarer path (a denial, a
#: handler's draft, a progress update) keeps attrs' own ``__init__``.
HOT = {"Record", "ToolCallRequested", "PolicyDecided", "ToolExecutionStarted",
       "ToolCallCompleted", "AssistantMessage", "ModelToolCall", "ToolCall", "CallOutcome",
       "ModelRequest", "ModelResponded", "ToolResultEntry", "CallView",
       # built by the readers of a fold
       "ApprovalRequested", "ApprovalResolved", "ToolCallFailed", "ToolCallRewritten", "Usage",
       "UserMessage"}


def test_exactly_the_classes_made_on_a_hot_path_have_it() -> None:
    assert {cls.__name__ for cls in fast_classes()} == HOT


@pytest.mark.parametrize("cls", fast_classes(), ids=lambda cls: cls.__name__)
def test_same_signature_values_defaults_and_frozenness_as_attrs(cls: type) -> None:
    fields = attrs.fields(cls)
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [f.name for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    for param, field in zip(params, fields):
        expected = inspect.Parameter.empty if field.default is attrs.NOTHING else field.default
        assert param.default is expected, field.name

    values = {f.name: object() for f in fields}  # one distinct marker per field
    made = cls(**values)
    assert attrs.asdict(made, recurse=False) == values
    assert made == cls(**values) and hash(made) == hash(cls(**values))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(made, fields[0].name, None)
    required = {f.name: values[f.name] for f in fields if f.default is attrs.NOTHING}
    with_defaults = cls(**required)
    for field in fields:
        wanted = values[field.name] if field.default is attrs.NOTHING else field.default
        assert getattr(with_defaults, field.name) is wanted
    changed = attrs.evolve(made, **{fields[0].name: "changed"})
    assert getattr(changed, fields[0].name) == "changed" and getattr(made, fields[0].name) != "changed"
    if required:
        with pytest.raises(TypeError, match="missing"):
            cls()
    with pytest.raises(TypeError, match="unexpected"):
        cls(**values, not_a_field=1)


def refused(problem: str, cls: Any) -> None:
    with pytest.raises(TypeError, match=problem):
        fast_init(cls)


def test_classes_whose_init_does_more_are_refused() -> None:
    @attrs.frozen(kw_only=True)
    class Validated:
        x: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen(kw_only=True)
    class Converted:
        x: int = attrs.field(converter=int)

    @attrs.frozen(kw_only=True)
    class Factory:
        x: list[int] = attrs.field(factory=list)

    @attrs.frozen(kw_only=True, cache_hash=True)
    class Cached:
        x: int

    @attrs.frozen(kw_only=True)
    class Hooked:
        x: int

        def __attrs_post_init__(self) -> None:
            pass

    @attrs.frozen
    class Positional:
        x: int

    @attrs.define(kw_only=True)
    class Mutable:
        x: int

    refused("validator or a converter", Validated)
    refused("validator or a converter", Converted)
    refused("factory default", Factory)
    refused("caches its hash", Cached)
    refused("post-init hook", Hooked)
    refused("not a keyword argument", Positional)
    refused("not a frozen, slotted attrs class", Mutable)


def field_values(cls: type) -> dict[str, st.SearchStrategy[Any]]:
    """Values for each field: of its type where the tests know how to draw one, and any
    object besides (neither ``__init__`` checks types)."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # an annotation only a type checker imports
        hints = {}
    strategies = {}
    for field in attrs.fields(cls):
        anything = st.builds(object)
        try:
            strategies[field.name] = values_of(hints[field.name]) | anything
        except (KeyError, TypeError):
            strategies[field.name] = anything
    return strategies


@pytest.mark.parametrize("cls", sorted(REFERENCE_INITS, key=lambda cls: cls.__qualname__),
                         ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_the_fast_init_builds_what_attrs_own_builds(cls: type, data: st.DataObject) -> None:
    values = field_values(cls)
    fields = attrs.fields(cls)
    kwargs = data.draw(st.fixed_dictionaries(
        {f.name: values[f.name] for f in fields if f.default is attrs.NOTHING},
        optional={f.name: values[f.name] for f in fields if f.default is not attrs.NOTHING},
    ), label="kwargs")
    fast = cls(**kwargs)
    reference = object.__new__(cls)
    REFERENCE_INITS[cls](reference, **kwargs)
    for field in fields:
        assert getattr(fast, field.name) is getattr(reference, field.name), (
            f"{cls.__qualname__}.{field.name}: the fast __init__ set another value than attrs'")
    assert fast == reference
    built = builder(cls)(**kwargs)
    assert type(built) is cls and built == reference
    for field in fields:
        assert getattr(built, field.name) is getattr(reference, field.name), (
            f"{cls.__qualname__}.{field.name}: the builder set another value than attrs'")
    dropped = data.draw(st.sampled_from([None, *kwargs]), label="dropped")
    if dropped is not None and attrs.fields_dict(cls)[dropped].default is attrs.NOTHING:
        partial = {k: v for k, v in kwargs.items() if k != dropped}
        with pytest.raises(TypeError):
            cls(**partial)
        with pytest.raises(TypeError):
            builder(cls)(**partial)
        with pytest.raises(TypeError):
            REFERENCE_INITS[cls](object.__new__(cls), **partial)


@pytest.mark.parametrize("cls", sorted(REFERENCE_INITS, key=lambda cls: cls.__qualname__),
                         ids=lambda cls: cls.__name__)
def test_the_fast_init_has_attrs_own_signature(cls: type) -> None:
    made_by_attrs = REFERENCE_INITS[cls]
    assert inspect.signature(cls.__init__) == inspect.signature(made_by_attrs)  # type: ignore[misc]
    # the builder takes the same arguments, without ``self``
    def params(function: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]

    assert params(builder(cls)) == params(made_by_attrs)[1:]
