"""A server's tool list, read within bounds.

``tools/list`` is paged by the server: it says whether there is a next page, and a server may
never say there is none, or never answer, or list more tools than anyone could use. A mount
reads the list with :func:`list_tools`, which stops at the first limit of
:class:`ListingLimits` it reaches (time, pages, tools, bytes of declarations) with a
:class:`ListingError` that names the limit and how to raise it. The defaults are far above
what a real server lists (MCP servers list tens of tools, on one page) and far below what
would hold a session up.

What one page may weigh is the transport's to bound, not this module's: a page arrives
whole, parsed by the SDK, before its tools are counted here.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from ._sdk import mcp, mcp_types
from .errors import ListingError

__all__ = ["ListingError", "ListingLimits", "list_tools"]


def _positive(_: Any, attribute: Any, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"ListingLimits: {attribute.name} must be a positive number, "
                         f"not {value!r}")


@attrs.frozen(kw_only=True)
class ListingLimits:
    """How much of a server's tool list a mount reads before it gives up.

    ``timeout``: seconds for the whole listing (and, when mounting, for connecting first);
    ``pages``: pages of ``tools/list``; ``tools``: tools in all; ``bytes``: their declarations,
    as JSON (names, descriptions, schemas, annotations)."""

    timeout: float = attrs.field(default=30.0, validator=_positive)
    pages: int = attrs.field(default=100, validator=_positive)
    tools: int = attrs.field(default=1_000, validator=_positive)
    bytes: int = attrs.field(default=4_000_000, validator=_positive)


async def list_tools(client: mcp.Client, limits: ListingLimits,
                     server: str) -> list[mcp_types.Tool]:
    """Every tool ``client``'s server lists, page by page, within ``limits`` (the timeout
    included: the caller bounds whatever else it waits for). ``server`` names the server in a
    :class:`ListingError`."""
    listed: list[mcp_types.Tool] = []
    pages = size = 0
    cursor: str | None = None
    with trio.move_on_after(limits.timeout) as waited:
        while True:
            # never from the client's response cache, which another client may share: after
            # a reconnect it would be the old server's word
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            pages += 1
            listed.extend(page.tools)
            size += len(page.model_dump_json(by_alias=True, exclude_none=True).encode())
            cursor = page.next_cursor
            if len(listed) > limits.tools:
                raise _over(server, f"lists more than {limits.tools} tools", "tools")
            if size > limits.bytes:
                raise _over(server, f"lists more than {limits.bytes} bytes of tool "
                                    f"declarations", "bytes")
            if cursor is None:
                return listed
            if pages >= limits.pages:
                raise _over(server, f"lists its tools in more than {limits.pages} pages",
                            "pages")
    assert waited.cancelled_caught
    raise _over(server, f"did not list its tools within {limits.timeout} s", "timeout")


def _over(server: str, problem: str, limit: str) -> ListingError:
    return ListingError(f"the MCP server {server!r} {problem}: the mount gives up on it (to "
                        f"allow more, mount it with listing=ListingLimits({limit}=...))")
