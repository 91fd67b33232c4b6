"""How the engine names its calls, in one place.

``"{turn}.{index}"`` for the calls of an assistant message, ``"h{n}"`` for the host's calls
(``session.call_tool``; ``n`` counts the host calls the log holds, from 0), and
``"{parent}/{n}"`` for nested calls. So every id names its top-level call in its first part,
and the first character says who asked for that one: a digit for the model, ``h`` for the
host. Pure: no trio, no I/O.
"""

from __future__ import annotations

__all__ = ["HOST_PREFIX", "from_host", "host_call_id"]

#: The first character of a host call's id (and of every id below it).
HOST_PREFIX = "h"


def host_call_id(index: int) -> str:
    """The id of the host's call number ``index`` (from 0) in its session: ``"h0"``, ``"h1"``."""
    return f"{HOST_PREFIX}{index}"


def from_host(call_id: str) -> bool:
    """Whether ``call_id`` is a host call or a call nested under one."""
    return call_id.startswith(HOST_PREFIX)
