"""Every Python block of README.md and docs/*.md runs: the convention, and its runner.

A block runs as a program of its own, for real, in a fresh temporary directory (the current
directory and ``tempfile``'s) with no network but this machine's loopback (a block may serve on
``127.0.0.1`` and call itself there). Top-level ``await`` is allowed: such a block runs
under ``trio.run``, as does every block with a context or a ``calls`` line; any other block runs
as a plain script (so it may call ``trio.run`` itself). A block that is not a whole program says
what it needs in HTML comments on the lines right above its fence (GitHub does not show them)::

    <!-- example in: NAME -->          run inside the named context (tests/doc_contexts.py)
    <!-- example continues -->         run after the previous Python block of the same file,
                                       in its namespace and context
    <!-- example calls: TOOL {JSON} --> then call TOOL (a tool the block defined) once through
                                       a session, with these arguments: it must complete
    <!-- example file: NAME -->        a file of the doc's example project, run with pytest by
                                       tests/testing/test_testing_docs.py
    <!-- example not run: REASON -->   shown, never run; the reason shows as a skip in every run

A failure names the doc, and the line of the block's fence; the traceback shows the doc's own
lines. docs/contributing.md says the same for people writing docs.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import re
import socket
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import Session, ToolSpec, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from tests.doc_contexts import CONTEXTS

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```\s*(\S*)")
MARKER = re.compile(r"^<!--\s*example\b(?P<body>.*?)-->\s*$")
MARKER_START = re.compile(r"^ {0,3}<!--\s*example\b")  # four spaces in: a code block
DIRECTIVE = re.compile(
    r"^\s*(?P<word>in|continues|calls|file|not run)\s*(?::\s*(?P<value>.*?))?\s*$")
HOW = ("declare what the block needs with <!-- example in: NAME --> (contexts: {contexts}), "
       "<!-- example continues -->, or <!-- example not run: REASON --> on the line above its "
       "fence: see docs/contributing.md")


class DocMarkupError(ValueError):
    """A doc's example markers are malformed: which file, which line, and what is wrong."""


class DocExampleFailed(AssertionError):
    """A doc's Python block failed when run: which file, which block, and why."""


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a doc, with what its markers declare."""

    doc: Path
    line: int  # the line of the opening fence, counted from 1
    code: str
    context: str | None = None
    continues: Block | None = None
    calls: tuple[tuple[str, Any], ...] = ()
    file: str | None = None
    not_run: str | None = None

    @property
    def where(self) -> str:
        """``docs/tools.md:5``: the doc and the line of the block's fence."""
        return f"{shown(self.doc)}:{self.line}"

    def chain(self) -> list[Block]:
        """The blocks that run for this one, in order: those it continues, then itself."""
        return [*(self.continues.chain() if self.continues else []), self]

    def __repr__(self) -> str:
        return f"<block {self.where}>"


def shown(doc: Path) -> str:
    """A doc's path as a failure names it: from the checkout's root."""
    return doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else str(doc)


def docs() -> list[Path]:
    """The docs whose blocks run: README.md and docs/*.md."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(doc: Path, markdown: str | None = None) -> list[Block]:
    """The Python blocks of ``doc`` (or of ``markdown``, as if it were ``doc``'s text) in
    order; a malformed marker raises :class:`DocMarkupError` naming the doc and the line."""
    text = doc.read_text(encoding="utf-8") if markdown is None else markdown
    lines = text.splitlines()
    name = shown(doc)
    found: list[Block] = []
    markers: list[tuple[int, str]] = []  # the marker lines right above the current line
    index = 0
    while index < len(lines):
        line = lines[index]
        if marker := MARKER.match(line):
            markers.append((index + 1, marker.group("body")))
            index += 1
            continue
        if MARKER_START.match(line):
            raise DocMarkupError(f"{name}:{index + 1}: an example marker is one whole line, "
                                 "from its first column: <!-- example WORD: VALUE -->")
        fence = FENCE.match(line)
        if fence is None:
            if markers:
                raise DocMarkupError(f"{name}:{markers[0][0]}: an example marker must be right "
                                     "above the fence of a ```python block")
            index += 1
            continue
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), None)
        if end is None:
            raise DocMarkupError(f"{name}:{index + 1}: this fenced block is never closed")
        language = fence.group(1)
        if language != "python":
            if markers:
                raise DocMarkupError(f"{name}:{index + 1}: example markers belong to ```python "
                                     f"blocks, not ```{language}")
            if language in ("py", "python3", "pycon"):
                raise DocMarkupError(f"{name}:{index + 1}: write ```python, so the block runs")
        else:
            code = "".join(f"{text}\n" for text in lines[index + 1:end])
            found.append(_block(doc, name, index + 1, code, markers, found))
        markers = []
        index = end + 1
    if markers:
        raise DocMarkupError(f"{name}:{markers[0][0]}: an example marker must be right above the "
                             "fence of a ```python block")
    return found


def _block(doc: Path, name: str, line: int, code: str, markers: list[tuple[int, str]],
           before: list[Block]) -> Block:
    fields: dict[str, Any] = {}
    calls: list[tuple[str, Any]] = []
    for at, body in markers:
        where = f"{name}:{at}"
        directive = DIRECTIVE.match(body)
        if directive is None:
            raise DocMarkupError(f"{where}: unknown example marker {body.strip()!r}; the markers "
                                 "are: in: NAME, continues, calls: TOOL {JSON}, file: NAME, "
                                 "not run: REASON")
        word, value = directive.group("word"), directive.group("value") or ""
        if (word == "continues") != (value == ""):
            raise DocMarkupError(f"{where}: 'example {word}' " + (
                "takes no value" if word == "continues" else "needs a value after the colon"))
        if word == "in" and value not in CONTEXTS:
            raise DocMarkupError(f"{where}: no context named {value!r}; the contexts are "
                                 f"{', '.join(sorted(CONTEXTS))} (tests/doc_contexts.py)")
        if word == "continues":
            if not before or before[-1].file or before[-1].not_run:
                raise DocMarkupError(f"{where}: 'example continues' needs a Python block above "
                                     "it in the same file that runs")
            fields["continues"] = before[-1]
        elif word == "calls":
            tool, _, arguments = value.partition(" ")
            try:
                calls.append((tool, json.loads(arguments or "{}")))
            except ValueError as exc:
                raise DocMarkupError(f"{where}: the arguments of 'example calls' must be one "
                                     f"JSON object ({exc})") from None
        else:
            fields[{"in": "context", "file": "file", "not run": "not_run"}[word]] = value
    if "file" in fields and (len(fields) > 1 or calls):
        raise DocMarkupError(f"{name}:{line}: an example file takes no other marker")
    if "not_run" in fields and (len(fields) > 1 or calls):
        raise DocMarkupError(f"{name}:{line}: a block that is not run takes no other marker")
    if "continues" in fields and "context" in fields:
        raise DocMarkupError(f"{name}:{line}: a block that continues another runs in its context")
    return Block(doc=doc, line=line, code=code, calls=tuple(calls), **fields)


def all_blocks() -> list[Block]:
    """Every Python block of every doc."""
    return [block for doc in docs() for block in blocks(doc)]


# -- running a block -------------------------------------------------------------------------


def describe(exc: BaseException) -> str:
    """``Type: message``; each leaf of an exception group, joined."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _has(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_has(inner, kind) for inner in exc.exceptions)
    return isinstance(exc, kind)


def failed(block: Block, what: str, exc: BaseException | None = None) -> DocExampleFailed:
    """The error for ``block``: where it is, what failed, and for a fragment what to do."""
    message = f"{block.where}: the python block starting on this line {what}"
    if exc is not None and _has(exc, NameError):
        message += "\nif the block is a fragment, " + HOW.format(contexts=", ".join(CONTEXTS))
    return DocExampleFailed(message)


def compiled(block: Block) -> Any:
    """The block's code, compiled so that tracebacks name the doc and its own line numbers."""
    source = "\n" * block.line + block.code
    try:
        return compile(source, str(block.doc), "exec", dont_inherit=True,
                       flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as exc:
        raise failed(block, f"is not valid Python: {exc}") from exc


def _refuse_network(*args: Any, **kwargs: Any) -> Any:
    raise OSError("the docs' examples run without network: use a local stand-in")


#: the addresses a block may reach: this machine's, by number (a server it runs itself)
LOOPBACK = ("127.0.0.1", "::1")


def isolate(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in ``directory`` (also tempfile's), importable, with no network but loopback."""
    monkeypatch.chdir(directory)
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    monkeypatch.syspath_prepend(str(directory))
    getaddrinfo = socket.getaddrinfo
    connect = socket.socket.connect

    def loopback_names_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if (host.decode() if isinstance(host, bytes) else host) not in LOOPBACK:
            _refuse_network()
        return getaddrinfo(host, *args, **kwargs)

    def local_only(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in LOOPBACK:
            _refuse_network()
        connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_names_only)
    monkeypatch.setattr(socket.socket, "connect", local_only)


def run_block(block: Block, directory: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run ``block`` (after the blocks it continues) in ``directory``; its namespace after."""
    chain = block.chain()
    codes = [(part, compiled(part)) for part in chain]
    isolate(directory, monkeypatch)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    context = CONTEXTS[chain[0].context](directory) if chain[0].context else None
    asynchronous = (any(code.co_flags & inspect.CO_COROUTINE for _, code in codes)
                    or bool(block.calls) or hasattr(context, "__aenter__"))
    before = set(sys.modules)
    try:
        if asynchronous:
            trio.run(_run_async, block, codes, context, namespace)
        else:
            with _entered(block, context, namespace):
                for part, code in codes:
                    with _reported(part):
                        exec(code, namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, JsonlStore):
                value.close()
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "")).startswith(str(directory)):
                del sys.modules[name]
    return namespace


class _reported:
    """Turn whatever the block raises into :class:`DocExampleFailed` naming the block."""

    def __init__(self, block: Block, what: str = "raised") -> None:
        self.block, self.what = block, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, DocExampleFailed):
            raise failed(self.block, f"{self.what} {describe(exc)}", exc) from exc


class _entered:
    """Enter a sync context (or none), put its names in the namespace, report its failures."""

    def __init__(self, block: Block, context: Any, namespace: dict[str, Any]) -> None:
        self.block, self.context, self.namespace = block, context, namespace

    def __enter__(self) -> None:
        if self.context is not None:
            with _reported(self.block, f"failed in its context {_context(self.block)!r}:"):
                self.namespace.update(self.context.__enter__())

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self.context is not None:
            with _reported(self.block, f"failed in its context {_context(self.block)!r}:"):
                self.context.__exit__(kind, exc, tb)


def _context(block: Block) -> str | None:
    return block.chain()[0].context


async def _run_async(block: Block, codes: list[tuple[Block, Any]], context: Any,
                     namespace: dict[str, Any]) -> None:
    name = _context(block)
    if context is None or not hasattr(context, "__aenter__"):
        with _entered(block, context, namespace):
            await _run_codes(codes, namespace)
    else:
        with _reported(block, f"failed in its context {name!r}:"):
            async with context as names:
                namespace.update(names)
                await _run_codes(codes, namespace)
    for tool, arguments in block.calls:
        await call_tool(block, namespace, tool, arguments)


async def _run_codes(codes: list[tuple[Block, Any]], namespace: dict[str, Any]) -> None:
    for part, code in codes:
        with _reported(part):
            result = eval(code, namespace)
            if code.co_flags & inspect.CO_COROUTINE:
                await result


async def call_tool(block: Block, namespace: dict[str, Any], name: str, arguments: Any) -> None:
    """Call the tool ``name`` the block defined once, approved, through a session of its own."""
    spec = namespace.get(name)
    asked = f"{name}({json.dumps(arguments)})"
    if not isinstance(spec, ToolSpec):
        raise failed(block, f"defines no tool named {name!r} for 'example calls: {asked}'")
    model = FauxModel([faux_tool_call(spec.name, arguments), faux_text("done")])
    with _reported(block, f"could not call {asked}:"):
        async with Session.open(MemoryStore(), model=model, tools=[spec],
                                approver=approve_all) as session:
            await session.prompt(f"call {name}")
            top = [call for call in session.calls.values() if call.parent_id is None]
    call = top[0]
    if call.status == "completed" and call.result is not None and not call.result.is_error:
        return
    terminal = call.terminal
    detail = getattr(terminal, "message", None) or (call.result.text if call.result else "")
    error = getattr(terminal, "error", None)
    trace = f"\n{error.traceback}" if error is not None and error.traceback else ""
    raise failed(block, f"defines a tool that did not complete: {asked} ended "
                        f"{call.status}: {detail}{trace}")


def runnable(every: list[Block]) -> Iterator[Block]:
    """The blocks the generic runner runs (example files run as a project elsewhere)."""
    return (block for block in every if block.file is None)
