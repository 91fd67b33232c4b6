"""Validating arguments: fastjsonschema's path beside the 2020-12 one, and a bare call.

``python -m benchmarks.schemas [--quick] [--json | --markdown] [--repeat N] [--clock wall|cpu]``:
the same arguments (an object with a string, a number, a list of strings and a two-item tuple)
checked by ``SchemaValidator.violation`` on each path the engine has
(:mod:`engine.core.schemas.checking`): fastjsonschema, for a draft-07 schema that writes the tuple as
array-form ``items``, and the 2020-12 validator (jsonschema, :mod:`engine.core.schemas.draft2020`), for the
2020-12 schema pydantic writes, with ``prefixItems``; valid arguments, then arguments whose
last field breaks the schema. The baseline, measured in the same run, is a bare call of a
Python function that takes the arguments and returns ``None``. Needs the ``schemas2020`` extra
(``jsonschema``). docs/performance.md ("Schema validation") has a run of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from engine.core.schemas.checking import compile_schema

from .__main__ import command
from .harness import Figure, Row, Settings, interleave, paired

US = 1e6

_FIELDS = {
    "path": {"type": "string", "minLength": 1},
    "size": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}},
}
DRAFT07 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
           "properties": {**_FIELDS, "pair": {"type": "array", "minItems": 2, "maxItems": 2,
                                              "items": [{"type": "integer"},
                                                        {"type": "string"}]}},
           "required": ["path", "pair"]}
D2020 = {"type": "object",
         "properties": {**_FIELDS, "pair": {"type": "array", "minItems": 2, "maxItems": 2,
                                            "prefixItems": [{"type": "integer"},
                                                            {"type": "string"}]}},
         "required": ["path", "pair"]}
VALID = {"path": "README.md", "size": 2048, "tags": ["docs", "top"], "pair": [1, "a"]}
INVALID = {**VALID, "pair": ["a", 1]}


def _bare(arguments: Any) -> None:
    return None


def per_call(check: Callable[[Any], object], arguments: Any, calls: int,
             clock: Callable[[], float]) -> Callable[[], float]:
    """A measure: microseconds per ``check(arguments)``, over ``calls`` calls."""
    def measure() -> float:
        start = clock()
        for _ in range(calls):
            check(arguments)
        return (clock() - start) / calls * US

    return measure


def run(settings: Settings) -> list[Row]:
    fast, slow = compile_schema(DRAFT07), compile_schema(D2020)
    assert (fast.implementation, slow.implementation) == ("fastjsonschema", "jsonschema")
    assert fast.violation(VALID) is None and slow.violation(VALID) is None
    assert fast.violation(INVALID) is not None and slow.violation(INVALID) is not None
    calls, clock = settings.size(20_000, 200), settings.clock
    named = [
        ("fastjsonschema (draft-07, array-form items), valid", fast.violation, VALID),
        ("jsonschema (2020-12, prefixItems), valid", slow.violation, VALID),
        ("fastjsonschema (draft-07, array-form items), invalid", fast.violation, INVALID),
        ("jsonschema (2020-12, prefixItems), invalid", slow.violation, INVALID),
    ]
    measures = [per_call(check, data, calls, clock) for _, check, data in named]
    samples = interleave(settings.reps(), [*measures, per_call(_bare, VALID, calls, clock)])
    bare = Figure(name="bare function call", unit="µs/call", samples=tuple(samples[-1]))
    rows = []
    for (name, _, _), values in zip(named, samples):
        figure = Figure(name=name, unit="µs/call", samples=tuple(values))
        extra = paired(figure, bare, lambda a, b: a - b)
        rows.append(Row(group="schemas", figure=figure, baseline=bare,
                        comparison=f"+{extra:.2f} µs"))
    return rows


def main(argv: list[str] | None = None) -> int:
    return command("python -m benchmarks.schemas", __doc__, run, argv)


if __name__ == "__main__":
    sys.exit(main())
