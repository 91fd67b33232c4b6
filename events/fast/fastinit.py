"""A faster ``__init__`` for the frozen attrs classes made on every call.

attrs writes each field of a frozen class through ``object.__setattr__`` (its own
``__setattr__`` refuses), which costs about a tenth of a microsecond per field; a session
makes about fifteen such objects per tool call (each record, its event, the model's call, the
tool's ``ToolCall``, ...). :func:`fast_init` gives such a class an ``__init__`` that writes
the slots through their descriptors instead: the same keyword-only signature, the same
defaults, the same object, in about two thirds of the time.

It only takes a class whose ``__init__`` does nothing else: frozen and slotted, every field
in ``__init__``, no validator, converter or factory default, no hash cache, no
``__attrs_pre_init__``/``__attrs_post_init__``; anything else is a ``TypeError`` at import.
The instances stay frozen (``__setattr__`` still refuses) and everything else about the class
is attrs' own (``attrs.evolve``, equality, hashing, cattrs).

attrs' own ``__init__`` stays the reference: :data:`REFERENCE_INITS` keeps it for every class
given a fast one, and tests/events/test_fastinit.py checks, with random values for every field
(defaults left out or given), that both build the same instance. A new field needs nothing
here (the fast ``__init__`` is made from the fields); a field this cannot set (a validator, a
converter, a factory) makes the class a ``TypeError`` at import, naming it. It saves about 6%
of a nested call's and of a turn's instructions (docs/performance.md, "One codec").

The same code also makes a *builder* for each such class (:func:`builder`): a plain function
with the ``__init__``'s keyword arguments that returns the instance, for the decoders, which
make one or more of these objects for every line of a log; calling the class costs as much
again as setting the slots (docs/performance.md, "Opening and folding a log"). The tests
hold it to attrs' ``__init__`` as they hold the fast one.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["BUILDERS", "REFERENCE_INITS", "builder", "fast_init"]

C = TypeVar("C", bound=type)
T = TypeVar("T")

#: Every class given a fast ``__init__``, with the ``__init__`` attrs made for it.
REFERENCE_INITS: dict[type, Callable[..., None]] = {}

#: Every class given a fast ``__init__``, with its builder (see :func:`builder`).
BUILDERS: dict[type, Callable[..., Any]] = {}


def builder(cls: type[T]) -> Callable[..., T]:
    """A function that takes the arguments of ``cls`` (given :func:`fast_init`) and returns
    the instance ``cls(...)`` would, without calling the class.

    Calling a class runs ``__new__`` and then ``__init__`` through the type, which packs the
    keyword arguments into a dict: about 3 000 instructions, as much as setting five slots.
    The builder is one plain function call; its body is the fast ``__init__``'s. For the
    decoders, which make an object of each line (a record, its event, what is inside).
    """
    return BUILDERS[cls]


def fast_init(cls: C) -> C:
    """Replace the ``__init__`` attrs made for ``cls`` with one that sets the slots directly."""
    fields = attrs.fields(cls)
    problem = _unsuitable(cls, fields)
    if problem:
        raise TypeError(f"fast_init cannot take {cls.__qualname__}: {problem}")
    namespace: dict[str, Any] = {}
    params = []
    body = []
    for index, field in enumerate(fields):
        namespace[f"_set{index}"] = _slot(cls, field.name).__set__
        if field.default is attrs.NOTHING:
            params.append(field.name)
        else:
            namespace[f"_default{index}"] = field.default
            params.append(f"{field.name}=_default{index}")
        body.append(f"    _set{index}(self, {field.name})\n")
    signature, sets = ", ".join(params), "".join(body)
    namespace["_new"], namespace["_cls"] = object.__new__, cls
    source = (f"def __init__(self, *, {signature}):\n{sets}"
              f"def build(*, {signature}):\n    self = _new(_cls)\n{sets}    return self\n")
    exec(compile(source, f"<fast_init of {cls.__qualname__}>", "exec"), namespace)
    init = namespace["__init__"]
    BUILDERS[cls] = namespace["build"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    made_by_attrs = cls.__dict__["__init__"]
    init.__doc__ = made_by_attrs.__doc__
    init.__annotations__ = dict(made_by_attrs.__annotations__)
    REFERENCE_INITS[cls] = made_by_attrs
    setattr(cls, "__init__", init)
    return cls


def _slot(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise TypeError(f"{cls.__qualname__} has no slot {name!r}")


def _unsuitable(cls: type, fields: Any) -> str | None:
    if "__slots__" not in cls.__dict__ or cls.__dict__.get("__setattr__") is None:
        return "it is not a frozen, slotted attrs class"
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        return "it has a pre- or post-init hook"
    if "_attrs_cached_hash" in cls.__dict__.get("__slots__", ()):
        return "it caches its hash"
    for field in fields:
        if not field.init or not field.kw_only:
            return f"field {field.name!r} is not a keyword argument of __init__"
        if field.validator is not None or field.converter is not None:
            return f"field {field.name!r} has a validator or a converter"
        if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            return f"field {field.name!r} has a factory default"
        if field.alias != field.name:
            return f"field {field.name!r} is named {field.alias!r} in __init__"
    return None
