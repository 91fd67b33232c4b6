"""The tools a session can run, with their schemas checked and compiled once.

A registry is not changed once a session uses it: :meth:`Registry.with_spec` makes a new one
(the session's :class:`~engine.environment.Environment` then holds it), so a call that runs
keeps the tools it started with.

A spec's schemas are checked once per content, not once per session: :meth:`Registry.check`
remembers the validators of every pair of schemas that passed, by their exact print
(:func:`marshal.dumps`, which writes each value with its exact type: ``1``, ``1.0`` and
``True`` print apart, a tuple apart from a list, and a subclass of ``dict`` or ``str`` does not
print at all). A spec whose schemas print as a pair that passed before is the same JSON, value
for value and type for type, so it passes again with the same validators; a schema changed in
place since prints differently and is checked anew. Nothing is remembered for a schema that
does not print (such a schema is checked every time) or that was refused."""

from __future__ import annotations

import marshal
from typing import Any, Final

from .jsonvalues import TooDeep, ensure_json
from .schemas import SchemaError, SchemaValidator, compile_schema, too_deep
from .tools import ToolSpec

__all__ = ["Registry"]

_CHECKED_MAX: Final = 1024
#: The validators of every pair of schemas that passed :meth:`Registry.check`, by the print of
#: the pair (input, output). Bounded: when full, the oldest entry is dropped.
_CHECKED: dict[bytes, tuple[SchemaValidator, SchemaValidator | None]] = {}


class Registry:
    """Tool specs by name, and their compiled input and output validators."""

    def __init__(self) -> None:
        self.specs: dict[str, ToolSpec] = {}
        self.inputs: dict[str, SchemaValidator] = {}
        self.outputs: dict[str, SchemaValidator] = {}

    def check(self, spec: ToolSpec) -> tuple[SchemaValidator, SchemaValidator | None]:
        """Compile the spec's schemas; raises ``SchemaError`` naming the tool and keyword."""
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"{spec!r} is not a tool: decorate it with @tool")
        schemas: Any = (spec.input_schema, spec.output_schema)
        try:
            key = marshal.dumps(schemas, 2)
        except ValueError:  # not only exact JSON types (or nested too deeply): check it anew
            return self._check(spec)
        if (checked := _CHECKED.get(key)) is not None:
            return checked
        checked = self._check(spec)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.pop(next(iter(_CHECKED)), None)
        _CHECKED[key] = checked
        return checked

    @staticmethod
    def _check(spec: ToolSpec) -> tuple[SchemaValidator, SchemaValidator | None]:
        for role, schema in (("input", spec.input_schema), ("output", spec.output_schema)):
            try:
                ensure_json(schema)
            except TooDeep as exc:
                raise too_deep(f"tool {spec.name!r} {role}_schema", str(exc)) from None
            except ValueError as exc:
                raise SchemaError(
                    f"tool {spec.name!r} {role}_schema is not plain JSON ({exc}): the log could "
                    f"not hold it as written"
                ) from None
        inputs = compile_schema(
            spec.input_schema, role="input", where=f"tool {spec.name!r} input_schema"
        )
        outputs = None
        if spec.output_schema is not None:
            outputs = compile_schema(
                spec.output_schema, role="output", where=f"tool {spec.name!r} output_schema"
            )
        return inputs, outputs

    def with_spec(self, spec: ToolSpec) -> Registry:
        """A registry with ``spec`` added (or replacing the tool of its name); its schemas
        must pass :meth:`check`."""
        inputs, outputs = self.check(spec)
        registry = Registry()
        registry.specs = {**self.specs, spec.name: spec}
        registry.inputs = {**self.inputs, spec.name: inputs}
        registry.outputs = {name: validator for name, validator in self.outputs.items()
                            if name != spec.name}
        if outputs is not None:
            registry.outputs[spec.name] = outputs
        return registry
