"""The tools a session can run, with their schemas checked and compiled once.

A registry is not changed once a session uses it: :meth:`Registry.with_spec` makes a new one
(the session's :class:`~engine.core.environment.Environment` then holds it), so a call that runs
keeps the tools it started with.

A spec's schemas are checked once per content, not once per session: the spec remembers
(:attr:`ToolSpec.checked`, its own memo) the validators of the pairs of its schemas that
passed, by their exact print
(:func:`marshal.dumps`, which writes each value with its exact type: ``1``, ``1.0`` and
``True`` print apart, a tuple apart from a list, and a subclass of ``dict`` or ``str`` does not
print at all). A spec whose schemas print as a pair that passed before is the same JSON, value
for value and type for type, so it passes again with the same validators; a schema changed in
place since prints differently and is checked anew. Nothing is remembered for a schema that
does not print (such a schema is checked every time) or that was refused.

The print serves the tool's record too (:meth:`Registry.recorded`): where it is the JSON the
log records (no tuple in it, which the snapshot would write as a list), :func:`marshal.loads`
of it is a private copy of both schemas, made in C, where :meth:`ToolSpec.snapshot` walks
them in Python. The snapshot then holds the schemas as they were checked, the ones its
validators were compiled from."""

from __future__ import annotations

import marshal
from typing import Any, Final, NamedTuple

import attrs

from events.types import Annotations, ToolSnapshot

from .jsonvalues import TooDeep, copy_json, ensure_json
from .policy import PolicyDecision, by_annotations
from .schemas.checking import SchemaError, SchemaValidator, compile_schema, too_deep
from .tools import ToolSpec
from .typed import ToolSignature

__all__ = ["InputCheck", "Registry", "TypedInputs"]


@attrs.frozen(eq=False)
class TypedInputs:
    """A typed tool's input check: its schema, then its parameters' types
    (:meth:`~engine.core.typed.ToolSignature.problem`). A tool in the ``(call, ctx)`` form is
    checked by its schema's validator alone, so its calls do no more work than before typed
    tools existed."""

    schema: SchemaValidator
    signature: ToolSignature

    def violation(self, value: Any) -> str | None:
        """None if the schema accepts ``value`` and the types can hold it, else why not."""
        return self.schema.violation(value) or self.signature.problem(value)


#: What the gate asks of a tool's arguments (step 2): ``violation(arguments)``.
InputCheck = SchemaValidator | TypedInputs


class _Checked(NamedTuple):
    """What checking a spec's pair of schemas gave: their validators, and the pair's print if
    :func:`marshal.loads` of it copies the schemas as the log records them."""

    inputs: InputCheck
    outputs: SchemaValidator | None
    copies: bytes | None


class Registry:
    """Tool specs by name, and their compiled input checks and output validators."""

    def __init__(self) -> None:
        self.specs: dict[str, ToolSpec] = {}
        #: each tool's input check: its schema's validator, and a typed tool's types too
        self.inputs: dict[str, InputCheck] = {}
        self.outputs: dict[str, SchemaValidator] = {}
        #: the print of each tool's schemas, where it copies them as the log records them
        self._copies: dict[str, bytes] = {}
        #: the annotation rule's decision for each tool asked about (see :meth:`by_annotations`)
        self._decisions: dict[str, PolicyDecision] = {}

    def by_annotations(self, name: str, annotations: Annotations) -> PolicyDecision:
        """:func:`engine.core.policy.by_annotations`: the same for every call of a tool, so
        worked out (and its reason written) once per registered tool, not once per call; for
        annotations other than the registered tool's, worked out now."""
        spec = self.specs.get(name)
        if spec is None or spec.annotations is not annotations:
            return by_annotations(name, annotations)
        decision = self._decisions.get(name)
        if decision is None:
            decision = self._decisions[name] = by_annotations(name, annotations)
        return decision

    def check(self, spec: ToolSpec) -> tuple[InputCheck, SchemaValidator | None]:
        """Compile the spec's schemas; raises ``SchemaError`` naming the tool and keyword."""
        checked = self._checked(spec)
        return checked.inputs, checked.outputs

    def _checked(self, spec: ToolSpec) -> _Checked:
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"{spec!r} is not a tool: decorate it with @tool")
        schemas: Any = (spec.input_schema, spec.output_schema)
        try:
            key = marshal.dumps(schemas, 2)
        except ValueError:  # not only exact JSON types (or nested too deeply): check it anew
            return _Checked(*self._check(spec), None)
        checked: _Checked = spec.checked.get(key, lambda key: self._check_printed(spec, key))
        return checked

    def _check_printed(self, spec: ToolSpec, key: bytes) -> _Checked:
        inputs, outputs = self._check(spec)
        # the copies the snapshot would make print alike: the pair holds no tuple
        recorded = (copy_json(spec.input_schema),
                    None if spec.output_schema is None else copy_json(spec.output_schema))
        return _Checked(inputs, outputs, key if marshal.dumps(recorded, 2) == key else None)

    @staticmethod
    def _check(spec: ToolSpec) -> tuple[InputCheck, SchemaValidator | None]:
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
        validator = compile_schema(
            spec.input_schema, role="input", where=f"tool {spec.name!r} input_schema"
        )
        inputs: InputCheck = validator if spec.signature is None else TypedInputs(
            schema=validator, signature=spec.signature)
        outputs = None
        if spec.output_schema is not None:
            outputs = compile_schema(
                spec.output_schema, role="output", where=f"tool {spec.name!r} output_schema"
            )
        return inputs, outputs

    def with_spec(self, spec: ToolSpec) -> Registry:
        """A registry with ``spec`` added (or replacing the tool of its name); its schemas
        must pass :meth:`check`."""
        checked = self._checked(spec)
        name = spec.name
        registry = Registry()
        registry.specs = {**self.specs, name: spec}
        registry.inputs = {**self.inputs, name: checked.inputs}
        outputs, copies = registry.outputs, registry._copies
        outputs.update(self.outputs)
        copies.update(self._copies)
        if checked.outputs is not None:
            outputs[name] = checked.outputs
        else:
            outputs.pop(name, None)
        if checked.copies is not None:
            copies[name] = checked.copies
        else:
            copies.pop(name, None)
        return registry

    def recorded(self, name: str) -> ToolSnapshot:
        """The registered tool ``name`` as the log records it (:meth:`ToolSpec.snapshot`,
        with the schemas as they were checked; see the module's docstring)."""
        spec = self.specs[name]
        copies = self._copies.get(name)
        if copies is None:
            return spec.snapshot()
        input_schema, output_schema = marshal.loads(copies)
        return spec.snapshot_of(input_schema, output_schema)
