"""Code mode as the model is told it: one code tool whose description lists the active
``codemode`` tools as typed Python functions.

A ``codemode`` tool is not declared to the model by itself. When a session has the code tool
(a ``model-only`` tool named :data:`CODE_TOOL`, which :func:`engine.codemode.code_tool` makes),
the model is told about the code tool alone while any codemode tool is active, and its
description lists each active codemode tool as a function stub (:mod:`engine.core.typed.stubs`):
``name(...)`` to call it and wait, ``name_async(...)`` to await it, so that
``asyncio.gather`` runs several at once. A session without the code tool declares an active
codemode tool as it declares a deferred one.

What a program may call is decided here too (:func:`program_functions`), from the same active
set, so the description and the sandbox cannot disagree. Pure: the reducers call it when the
tools change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from events.types import ToolSnapshot

from .typed.stubs import FunctionStub, function_stub, python_name, stub_listing

__all__ = ["ASYNC_SUFFIX", "CODE_TOOL", "ProgramFunction", "code_declaration", "declared",
           "is_code_tool", "program_functions"]

#: The code tool's name.
CODE_TOOL: Final = "run_code"
#: What a tool's awaitable twin adds to its name.
ASYNC_SUFFIX: Final = "_async"

_HOW: Final = """\
Run a Python program in a sandbox and return what it printed and the value of its last \
expression. The sandbox runs a subset of Python 3 and of its standard library, with no \
files, network, environment or clock. The functions below are tools: each call is checked, recorded, and may wait for a \
person's approval.

Call a tool and wait for its result: `rows = read_rows(path="a.csv")`. To run several at once, \
await their `_async` twins together: `a, b = await asyncio.gather(read_rows_async(path="a.csv"), \
read_rows_async(path="b.csv"))` (top-level `await` works; `import asyncio` first). A tool with \
an output schema returns its structured value, any other returns its text. A failed call raises \
an exception the program can catch: PermissionError when it was denied or not approved, \
ValueError for invalid arguments, TimeoutError, or RuntimeError for the rest."""


def is_code_tool(snapshot: ToolSnapshot) -> bool:
    """Whether a registered tool is the code tool."""
    return snapshot.name == CODE_TOOL and snapshot.exposure == "model-only"


@attrs.frozen(kw_only=True)
class ProgramFunction:
    """A function a program may call: the tool it calls and whether it is the awaitable twin."""

    stub: FunctionStub
    is_async: bool


def program_functions(active: Iterable[ToolSnapshot]) -> dict[str, ProgramFunction]:
    """What a program may call, by the name it calls it: each active codemode tool, by its
    Python name and its ``_async`` twin. A name taken by an earlier tool is not given twice."""
    functions: dict[str, ProgramFunction] = {}
    for snapshot in active:
        if snapshot.exposure != "codemode":
            continue
        name = python_name(snapshot.name)
        twin = f"{name}{ASYNC_SUFFIX}"
        if name in functions or twin in functions:
            continue
        functions[name] = ProgramFunction(stub=function_stub(snapshot, name), is_async=False)
        functions[twin] = ProgramFunction(
            stub=function_stub(snapshot, twin, prefix="async "), is_async=True)
    return functions


def code_declaration(code_tool: ToolSnapshot, active: Sequence[ToolSnapshot]) -> ToolSnapshot:
    """The code tool as the model is told it: its own description, how to call tools, and the
    stubs of the functions the program may call now."""
    stubs = [f.stub for f in program_functions(active).values() if not f.is_async]
    own = code_tool.description.strip()
    text = (f"{own}\n\n" if own else "") + (
        f"{_HOW}\n\nThe tools (each also as an `_async` twin):\n\n```python\n"
        f"{stub_listing(stubs)}\n```")
    return attrs.evolve(code_tool, description=text)


def declared(active: Sequence[ToolSnapshot]) -> tuple[ToolSnapshot, ...]:
    """What the model is told, from the active tools in registration order: with the code
    tool among them, the codemode tools are left out and the code tool is declared with their
    stubs (or not at all while none is active); without it, every active tool as registered."""
    code = next((s for s in active if is_code_tool(s)), None)
    if code is None:
        return tuple(active)
    functions = [s for s in active if s.exposure == "codemode"]
    return tuple(code_declaration(s, functions) if s is code else s for s in active
                 if s.exposure != "codemode" and (s is not code or functions))

