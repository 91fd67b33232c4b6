"""JSON Schema for tool inputs and outputs: checked at registration, compiled once, pure.

:mod:`.checking` is the entry point (:func:`compile_schema`); :mod:`.walk` checks one document,
:mod:`.dialects` holds what each draft means, :mod:`.refs` follows ``$ref``, :mod:`.patterns`
keeps regular expressions linear and :mod:`.draft2020` validates what fastjsonschema cannot.
"""

from .checking import SchemaValidator, check_schema, compile_schema, too_deep
from .walk import SchemaError

__all__ = ["SchemaError", "SchemaValidator", "check_schema", "compile_schema", "too_deep"]
