"""fast_init: the hot frozen classes get an ``__init__`` that sets their slots directly, and
must not differ from attrs' own in anything a caller can see."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import engine.context
import engine.models
import engine.tools
import engine.views
import events.types
from events.fastinit import fast_init

MODULES = (events.types, engine.views, engine.tools, engine.models, engine.context)


def fast_classes() -> list[type]:
    found = []
    for module in MODULES:
        for value in vars(module).values():
            if (isinstance(value, type) and attrs.has(value) and value.__module__ == module.__name__
                    and value.__init__.__code__.co_filename.startswith("<fast_init")):
                found.append(value)
    return found


def test_the_classes_made_on_every_call_have_it() -> None:
    names = {cls.__name__ for cls in fast_classes()}
    assert {"Record", "ToolCallRequested", "PolicyDecided", "ToolExecutionStarted",
            "ToolCallCompleted", "AssistantMessage", "ModelToolCall", "ToolCall",
            "ToolResultEntry", "CallView"} <= names


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
