"""What a program may use: the limits the sandbox holds it to, with their defaults.

Set per session: the code tool is made with them (``code_tool(limits=CodeLimits(...))``), and
each session registers its own. docs/codemode.md lists them.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["CodeLimits"]


def _positive(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"CodeLimits({attribute.name}=...) takes a positive number, "
                         f"not {value!r}")


@attrs.frozen(kw_only=True)
class CodeLimits:
    """The limits of one program.

    - ``duration``: seconds the program's own code may run, in all (waiting for a tool or an
      approval does not count);
    - ``memory``: bytes of the sandbox's heap;
    - ``recursion``: depth of nested Python calls;
    - ``suspensions``: how often the program may stop for the host: each tool call, and each
      wait for awaited calls (``asyncio.gather``) counts one;
    - ``output``: characters of printed output kept and returned to the model (the rest is cut,
      and the cut is said);
    - ``result``: characters of the last expression's value returned to the model.

    A program past a limit ends with an error result that names it; the session goes on.
    """

    duration: float = attrs.field(default=10.0, validator=_positive)
    memory: int = attrs.field(default=64 * 1024 * 1024, validator=_positive)
    recursion: int = attrs.field(default=200, validator=_positive)
    suspensions: int = attrs.field(default=500, validator=_positive)
    output: int = attrs.field(default=16_000, validator=_positive)
    result: int = attrs.field(default=16_000, validator=_positive)

    def sandbox(self) -> dict[str, Any]:
        """The limits as the sandbox takes them (Monty's ``ResourceLimits``)."""
        return {"max_feed_duration_secs": float(self.duration), "max_memory": int(self.memory),
                "max_recursion_depth": int(self.recursion),
                "max_suspensions": int(self.suspensions)}
