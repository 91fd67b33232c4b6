"""Arguments that satisfy, or violate, a JSON Schema: Hypothesis strategies built from it.

:func:`valid_arguments` and :func:`invalid_arguments` read the schema and build a strategy
for it; they understand the keywords :func:`engine.testing.input_schemas` generates and those
a typed tool's inferred schema uses (``type``, also as a list, ``properties``, ``required``,
``additionalProperties``, ``enum``, ``const``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` (numbers, as drafts 06+
spell them), ``multipleOf`` (a whole number), ``items`` (one schema, or ``false``),
``prefixItems``, ``minItems``/``maxItems``, ``minProperties``/``maxProperties``, ``anyOf``,
and local ``$ref``s into ``$defs`` or ``definitions``, recursive ones too) and ignore the
annotations (``title``, ``description``, ``default``, ``examples``, ``format``, ``$schema``,
``$comment``). Any other keyword that constrains data raises ``ValueError`` naming it, rather
than generating values that might not fit.

Every value :func:`invalid_arguments` draws breaks the schema in one place (the wrong type, a
missing required property, an unexpected one, a value out of range, …) and every value
:func:`valid_arguments` draws fits it; ``tests/testing/test_testing_strategies.py`` checks both
against the engine's own validator. A schema that refers to itself is unrolled a few
references deep, then only values that need no further reference are drawn (lists left
empty, optional properties left out), so every value is finite. Example::

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
              "required": ["n"]}
    valid_arguments(schema).example()      # e.g. {"n": 3}
    invalid_arguments(schema).example()    # e.g. {"n": -1}, {}, or "n"
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from .breaking import Breaking
from .fitting import Reader, json_values

__all__ = ["json_values", "valid_arguments", "invalid_arguments", "weighted"]


def weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Draw from one of ``options``, each ``(weight, strategy)`` chosen in proportion to its
    weight (shrinking towards the first). Unlike ``st.one_of``, where a branch that is itself
    a ``one_of`` counts once per inner branch, the weights here are what they say.
    Example: ``weighted((3, valid_arguments(s)), (1, invalid_arguments(s)))``."""
    strategies = [strategy for _, strategy in options]
    picks = [index for index, (weight, _) in enumerate(options) for _ in range(weight)]
    return st.sampled_from(picks).flatmap(lambda index: strategies[index])


def valid_arguments(schema: Any) -> st.SearchStrategy[Any]:
    """Values that satisfy ``schema`` (see the module docstring for the keywords understood).

    For a tool's ``input_schema`` these are arguments the engine accepts."""
    return Reader(schema).valid(schema, 0)


def invalid_arguments(schema: Any) -> st.SearchStrategy[Any]:
    """Values that violate ``schema``, each in one way: the wrong type, a value outside an
    ``enum`` or ``const``, a string or array of the wrong length, a number out of range, a
    missing required property, an unexpected one, or (recursively) an invalid property or item.

    Raises ``ValueError`` if the schema accepts every value (``{}``, ``true``)."""
    reader = Reader(schema)
    found = Breaking(reader).invalid(schema, 0)
    if found is None:
        raise ValueError(f"every value satisfies {schema!r}: there are no invalid arguments")
    return found
