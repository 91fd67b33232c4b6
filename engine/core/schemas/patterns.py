"""The regular expressions of schemas (``pattern``, ``patternProperties``), matched in linear
time.

fastjsonschema matches them with Python's ``re``, a backtracking engine, and the match runs in
the session's trio loop without a checkpoint: no timeout or cancel scope can stop it. A pattern
a tool declares, met by a string the model writes, can then freeze the whole loop. Measured
(CPython 3.11, docs/schemas.md): ``^(a+)+$`` takes 1.5 s on 25 characters and four times as
long for every two more; ``.*x.*y`` takes 234 s on 10 000 characters; even ``a+b`` takes 3 s on
100 000 (the size limit lets arguments reach 1 000 000). Refusing "catastrophic" patterns at
registration cannot help: the last two are ordinary patterns, and every unanchored pattern that
backtracks is at least quadratic. So the engine matches them with RE2 (the ``google-re2``
package), whose time is linear in the text: each of those takes about 2 ms on 1 000 000
characters.

A pattern must therefore be one that both ``re`` (fastjsonschema compiles it first) and RE2
accept: no backreferences, no lookaround, repeat counts up to 1 000. :func:`problem` says why
one is refused, at registration. RE2 reads ``\\d``, ``\\w``, ``\\s`` and ``\\b`` as ASCII, and
``$`` only at the very end of the text: that is ECMA-262's meaning, which JSON Schema specifies
(Python's ``re`` reads them as Unicode, and ``$`` also before a final newline). Pure: no I/O.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

__all__ = ["linear", "problem", "searcher"]

_SURROGATE = re.compile("[\ud800-\udfff]")  # one character class: linear in ``re`` too


@lru_cache(maxsize=1)
def _re2() -> Any:
    try:
        module = importlib.import_module("re2")
    except ImportError:
        return None
    options = module.Options()
    options.log_errors = False  # a refused pattern is reported once, by problem(), not on stderr
    return module, options


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> Any:
    engine = _re2()
    if engine is None:
        raise ValueError("the linear-time regular expression engine is not installed "
                         "(pip install google-re2)")
    module, options = engine
    try:
        return module.compile(pattern, options)
    except module.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise ValueError(reason) from None


def problem(pattern: str) -> str | None:
    """``None`` if ``pattern`` can be matched in linear time, else why not (one line, saying
    what to do)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"is not a valid regular expression ({exc})"
    if _re2() is None:
        return ("needs the linear-time regular expression engine, which is not installed: "
                "pip install google-re2 (a dependency of toolledger)")
    try:
        _compile(pattern)
    except ValueError as exc:
        return (f"cannot be matched in linear time ({exc}); backreferences, lookahead and "
                f"lookbehind are not supported, and repeat counts go up to 1000, so that no "
                f"string can make a check run for minutes")
    return None


class _Linear:
    """What the generated validator calls in place of a compiled ``re`` pattern."""

    __slots__ = ("_search",)

    def __init__(self, compiled: Any) -> None:
        self._search: Callable[[str], Any] = compiled.search

    def search(self, text: str) -> Any:
        try:
            return self._search(text)
        except UnicodeEncodeError:  # a lone surrogate: RE2 reads UTF-8
            return self._search(_SURROGATE.sub("\ufffd", text))


def linear(check: Callable[..., Any], patterns: Iterable[str]) -> None:
    """Make the validator ``check`` (fastjsonschema's generated function) match every one of
    ``patterns`` (each accepted by :func:`problem`) with RE2 instead of ``re``.

    fastjsonschema keeps the compiled patterns of a schema in one mapping, keyed by the
    pattern as written, in the generated function's globals; each is swapped for its RE2
    twin. A pattern missing from that mapping is an error, not a silent fallback to ``re``.
    """
    compiled: dict[str, Any] = getattr(check, "__globals__", {}).get("REGEX_PATTERNS", {})
    for pattern in patterns:
        if pattern not in compiled:
            raise RuntimeError(f"the validator keeps no compiled pattern {pattern!r}: this "
                               f"fastjsonschema version is not supported")
        compiled[pattern] = _Linear(_compile(pattern))


def searcher(pattern: str) -> Callable[[str], Any]:
    """``pattern`` (accepted by :func:`problem`) as a linear-time ``search(text)``: for a
    validator that matches patterns itself (the 2020-12 one, :mod:`engine.core.schemas.draft2020`)."""
    return _Linear(_compile(pattern)).search
