"""The 2020-12 validator: for the schemas fastjsonschema cannot enforce.

fastjsonschema implements drafts 04/06/07; it reads 2019-09 and 2020-12 (MCP's default) as
draft-07 and silently ignores the keywords those added (``prefixItems``, which pydantic emits
for tuples, ``unevaluatedProperties``, ``dependentRequired``, ``$dynamicRef``, …).
:mod:`engine.core.schemas.checking` keeps fastjsonschema for every schema it handles, and hands a 2019-09 or
2020-12 schema that uses one of those keywords to the ``jsonschema`` package's validator of
that dialect (``Draft202012Validator``, ``Draft201909Validator``), when it is installed
(``pip install 'toolledger[schemas2020]'``; without it such a schema is refused at
registration, as before, saying what to do).

The same safety rules hold on this path:

- **Nothing is fetched.** The validator gets an empty ``referencing`` registry (jsonschema's
  default registry would fetch a remote ``$ref`` with ``urlopen``); :mod:`engine.core.schemas.refs`
  has already refused every ``$ref`` that is not local, and ``$dynamicRef`` must be local too.
- **No defaults are filled in**: jsonschema never changes the data.
- **Formats are annotations** unless the tool asks (``assert_formats``); then a format the
  validator cannot assert is refused at registration.
- **Bounded**: the schema passed the same walk (depth, shapes, ``$ref`` cycles); patterns are
  matched in linear time (RE2, :func:`engine.core.schemas.patterns.searcher`) by the ``pattern``,
  ``patternProperties`` and ``additionalProperties`` keywords, which this module supplies in
  place of jsonschema's (they use Python's backtracking ``re``). jsonschema's own evaluation of
  ``unevaluatedProperties`` matches ``patternProperties`` with ``re`` as well, so a schema that
  has both is refused; and an error inside the validator (a ``$dynamicRef`` that loops on the
  same value) is a violation, never a crash.

The cost of this path, beside fastjsonschema's, is measured in ``benchmarks/schemas.py``.
Pure: no I/O (the empty registry makes sure of it).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, Final

from fastjsonschema import JsonSchemaValueException

from .patterns import searcher

__all__ = ["DIALECTS", "INSTALL_HINT", "available", "compile_2020", "known_formats"]

#: The dialects this path validates.
DIALECTS: Final = ("2019-09", "2020-12")
INSTALL_HINT: Final = ("install the 2020-12 validator (pip install 'toolledger[schemas2020]') "
                       "and the engine validates it with jsonschema")


@lru_cache(maxsize=1)
def _modules() -> tuple[Any, Any] | None:
    """``(jsonschema, referencing)``, or ``None`` if they are not installed."""
    try:
        return importlib.import_module("jsonschema"), importlib.import_module("referencing")
    except ImportError:
        return None


def available() -> bool:
    """Whether the 2020-12 validator is installed."""
    return _modules() is not None


@lru_cache(maxsize=len(DIALECTS))
def _validator_class(dialect: str) -> Any:
    """The jsonschema validator class of ``dialect``, with linear-time pattern keywords."""
    modules = _modules()
    assert modules is not None
    jsonschema = modules[0]
    base = {"2020-12": jsonschema.Draft202012Validator,
            "2019-09": jsonschema.Draft201909Validator}[dialect]
    return jsonschema.validators.extend(base, validators={
        "pattern": _pattern, "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties})


def known_formats(dialect: str) -> frozenset[str]:
    """The formats the validator of ``dialect`` can assert."""
    return frozenset(_validator_class(dialect).FORMAT_CHECKER.checkers)


def compile_2020(doc: dict[str, Any], dialect: str, *, assert_formats: bool,
                 where: str) -> Callable[[Any], None]:
    """A check of ``doc`` (a checked private copy) that raises
    ``JsonSchemaValueException`` naming the first violation, like fastjsonschema's. Raises
    ``ValueError`` if the validator refuses the schema itself (``where`` names it)."""
    modules = _modules()
    assert modules is not None, "compile_2020 needs jsonschema: ask available() first"
    jsonschema, referencing = modules
    cls = _validator_class(dialect)
    try:
        cls.check_schema(doc)
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"{where} is not a valid {dialect} schema: {exc.message} "
                         f"(at '{_pointer(exc.absolute_path)}')") from None
    validator = cls(doc, registry=referencing.Registry(),
                    format_checker=cls.FORMAT_CHECKER if assert_formats else None)
    errors: Callable[[Any], Iterator[Any]] = validator.iter_errors

    def check(value: Any) -> None:
        error = next(iter(errors(value)), None)
        if error is not None:
            raise JsonSchemaValueException(f"{_path(error.absolute_path)}: {error.message}")

    return check


def _path(steps: Any) -> str:
    """A path into the data, as fastjsonschema writes it: ``data.pair[0]``."""
    text = "data"
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        elif step.isidentifier():
            text += f".{step}"
        else:
            text += f"[{json.dumps(step)}]"
    return text


def _pointer(steps: Any) -> str:
    return "".join(f"/{step}" for step in steps)


# -- the keywords that match patterns, in linear time ------------------------------------------
# (jsonschema's own, with RE2's search in place of re.search)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not searcher(pattern)(instance):
        yield _error(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        search = searcher(pattern)
        for key, value in instance.items():
            if search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    searches = [searcher(p) for p in schema.get("patternProperties", {})]
    extras = sorted((key for key in instance
                     if key not in known and not any(search(key) for search in searches)),
                    key=str)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield _error(f"Additional properties are not allowed "
                     f"({', '.join(repr(extra) for extra in extras)} unexpected)")


def _error(message: str) -> Any:
    modules = _modules()
    assert modules is not None
    return modules[0].exceptions.ValidationError(message)
