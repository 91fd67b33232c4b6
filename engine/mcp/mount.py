"""Mount an MCP server: its tools registered in a session, each call made through the official
client, and governed and logged like a local tool's.

A mounted tool is an ordinary :class:`~engine.tools.ToolSpec` whose body asks the server: the
session checks its schemas by its own rules when it is registered, validates the arguments,
runs the ``tool_call`` handlers, the policy and the approver, and records every step, as for
any tool. What is particular to a server lives here:

- **Names.** ``prefix`` is put before every tool's name, so that two servers (or a server and
  a local tool) cannot collide; a name the session already has for another tool is refused.
- **Hints** are the server's word, which nothing checks, and MCP says a client must not trust
  an untrusted server's: a mounted tool's policy reads MCP's defaults (destructive and
  open-world, so the policy asks) whatever the server declares. ``hints`` gives tools the
  host's own hints; ``trust_hints=True`` takes the server's at its word, an explicit choice.
- **Identity.** The server's name and version from its handshake are recorded with each tool's
  registration (:class:`~events.types.ToolSource`, beside the tool's name on the server, the
  hints it declared and whether the host trusted them), so every call in the log names the
  server that answered it, and ``toolledger show`` says what it claimed.
- **Failures.** A server's error result is the call's error result. A protocol error, a lost
  connection, a server that died, or no answer within ``timeout`` ends the call as a failure
  (``raised``, ``timeout``); the session goes on, and the next call connects again.
- **Output** is checked by the session alone, against the output schema that passed its rules
  at registration, with linear-time patterns: the SDK client's own check, which runs Python's
  backtracking ``re`` on the event loop, is turned off. Structured content that breaks the
  schema ends the call as ``invalid_output``, the value kept in the log.

The connection is the SDK's :class:`mcp.Client`, run in a task of the mount's own, so a
connection that breaks never takes the host's block with it. A session reopened after a
restart mounts the server again, which connects anew: a call the log left waiting for an
approval runs on the new connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from events.results import ToolResult
from events.types import Annotations, Exposure, ToolSource

from ..context import ToolContext
from ..registry import Registry
from ..session import Session
from ..tools import Execute, ToolCall, ToolSpec
from ._sdk import mcp, mcp_types
from .formats import annotations_from_mcp, result_from_mcp, tool_from_mcp

__all__ = ["Mount", "mount"]


class Mount:
    """One mounted MCP server: its identity, the session's names for its tools, and the
    connection their calls use (opened again after it broke)."""

    def __init__(self, server: Any, client_options: Mapping[str, Any],
                 nursery: trio.Nursery, name: str | None) -> None:
        self._server = server
        self._options = dict(client_options)
        self._nursery = nursery
        self._client: mcp.Client | None = None
        self._stop = trio.Event()
        self._connecting = trio.Lock()
        self._closed = False
        #: the server's name from its handshake (``name`` stands in when it gives none)
        self.server: str = name or "mcp server"
        #: the server's version from its handshake
        self.version: str | None = None
        #: the session's names for the mounted tools, by their names on the server
        self.tools: Mapping[str, str] = {}

    async def _connected(self) -> mcp.Client:
        """The live connection, made (again) if there is none."""
        async with self._connecting:
            if self._client is None:
                if self._closed:
                    raise RuntimeError(
                        f"the mount of the MCP server {self.server!r} has ended: its tools "
                        f"can be called only inside the block of mount()")
                await self._nursery.start(self._run)
            assert self._client is not None
            return self._client

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                   ) -> None:
        """One connection, in the mount's task: open until the mount ends or the connection
        breaks. A failure to connect goes to the caller; a break after that is only noted."""
        client = mcp.Client(self._server, **self._options)
        stop = trio.Event()
        started = False
        try:
            async with client:
                _leave_output_to_the_session(client)
                self._client, self._stop = client, stop
                task_status.started()
                started = True
                await stop.wait()
        except Exception:
            if not started:
                raise
            # the connection broke (a server that died, say): the next call connects again
        finally:
            if self._client is client:
                self._client = None

    def _lost(self, client: mcp.Client) -> None:
        """``client``'s connection is closed: end it, so that the next call makes a new one."""
        if self._client is client:
            self._client = None
            self._stop.set()

    def _close(self) -> None:
        self._closed = True
        self._stop.set()

    async def call(self, tool: str, arguments: Any) -> ToolResult:
        """Call the server's tool ``tool`` (its name on the server) and return its result.

        This is the body of every mounted tool; it raises for whatever is not a result:
        ``ConnectionError`` for a connection that closed during the call, the SDK's
        ``MCPError`` for a protocol error. The result's structured content is the session's
        to check against the tool's output schema, as a local tool's is."""
        client = await self._connected()
        try:
            result = await client.call_tool(tool, arguments)
        except mcp.MCPError as exc:
            if exc.error.code != mcp_types.CONNECTION_CLOSED:
                raise
            self._lost(client)
            raise ConnectionError(
                f"the MCP server {self.server!r} closed the connection during the call "
                f"({exc.error.message}); the next call connects again") from exc
        return result_from_mcp(result)

    def _execute(self, tool: str) -> Execute:
        async def execute(call: ToolCall, ctx: ToolContext) -> ToolResult:
            return await self.call(tool, call.arguments)

        execute.__name__ = execute.__qualname__ = f"mcp:{tool}"
        return execute

    async def _specs(self, *, prefix: str, only: Iterable[str] | None,
                     hints: Mapping[str, Annotations], trust_hints: bool,
                     timeout: float | None, exposure: Exposure) -> list[ToolSpec]:
        """The specs of the server's tools (those ``only`` names), checked by the session's
        schema rules: ``SchemaError`` or ``ValueError`` name the tool, before any is
        registered."""
        client = await self._connected()
        info = client.server_info
        if info is not None:
            self.server, self.version = info.name, info.version or None
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        by_name = {tool.name: tool for tool in listed}
        wanted = list(by_name) if only is None else list(dict.fromkeys(only))
        if unknown := [name for name in [*wanted, *hints] if name not in by_name]:
            raise ValueError(f"the MCP server {self.server!r} has no tool {unknown[0]!r} "
                             f"(its tools: {', '.join(sorted(by_name)) or 'none'})")
        specs = []
        for name in wanted:
            tool = by_name[name]
            said = annotations_from_mcp(tool.annotations, tool.title)
            annotations = hints.get(name)
            trusted = annotations is None and trust_hints
            if annotations is None:
                annotations = said if trusted else Annotations(title=said.title)
            try:
                spec = tool_from_mcp(
                    tool, self._execute(name), name=f"{prefix}{name}", annotations=annotations,
                    exposure=exposure, timeout=timeout,
                    source=ToolSource(server=self.server, version=self.version, tool=name,
                                      hints=said, hints_trusted=trusted))
            except ValueError as exc:
                raise ValueError(f"the MCP server {self.server!r}'s tool {name!r} cannot be "
                                 f"mounted: {exc}") from None
            Registry().check(spec)
            specs.append(spec)
        self.tools = {spec.source.tool: spec.name for spec in specs if spec.source is not None}
        return specs


async def _checked_by_the_session(name: str, result: mcp_types.CallToolResult) -> None:
    """What a mount's client does instead of checking a result against the tool's output
    schema itself: nothing. The session checks it, against the schema it registered.

    The SDK's client checks with ``jsonschema``, whose ``pattern`` runs in Python's
    backtracking ``re``, on the event loop, where no timeout or cancel scope can stop it: a
    server whose schema says ``^(a+)+$`` and that answers 28 ``a`` and a ``!`` froze the loop
    for seconds. For a tool it has not listed yet, the check lists the server's tools again,
    unbounded. The session's own check uses the schema that passed its rules when the tool was
    registered, with linear-time patterns (:mod:`engine.patterns`), and keeps the value that
    failed in the log, as for a local tool's output."""


def _leave_output_to_the_session(client: mcp.Client) -> None:
    """Turn off ``client``'s own check of tool results (:func:`_checked_by_the_session`), or
    refuse to go on with an SDK whose check cannot be turned off this way."""
    session = client.session
    if not callable(getattr(type(session), "validate_tool_result", None)):
        raise RuntimeError(
            "this version of the MCP SDK checks tool results in a way toolledger does not "
            "know how to leave to the session (ClientSession.validate_tool_result is gone); "
            "install an mcp version that toolledger supports (pip install 'toolledger[mcp]')")
    session.validate_tool_result = _checked_by_the_session  # type: ignore[method-assign]


def _check_collisions(session: Session, specs: Iterable[ToolSpec]) -> None:
    """A mounted tool may take the place of the same server tool only (a session reopened,
    or the server mounted again), never of another tool: a prefix keeps them apart."""
    for spec in specs:
        known = session.state.tools.get(spec.name)
        if known is None or spec.source is None:
            continue
        if known.source is None or (known.source.server, known.source.tool) != (
                spec.source.server, spec.source.tool):
            other = ("a local tool" if known.source is None
                     else f"{known.source.tool!r} of the MCP server {known.source.server!r}")
            raise ValueError(
                f"the session already has a tool named {spec.name!r} ({other}): mount the "
                f"MCP server {spec.source.server!r} with a prefix, e.g. "
                f"prefix={spec.source.server + '.'!r}")


@asynccontextmanager
async def mount(
    session: Session,
    server: Any,
    *,
    prefix: str = "",
    only: Iterable[str] | None = None,
    hints: Mapping[str, Annotations] | None = None,
    trust_hints: bool = False,
    timeout: float | None = 60.0,
    exposure: Exposure = "direct",
    name: str | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[Mount]:
    """Connect to an MCP server and register its tools in ``session`` for the block's length.

    ``server`` is what the SDK's :class:`mcp.Client` connects to: a URL (streamable HTTP), a
    :class:`mcp.StdioServerParameters` (a subprocess over stdio), any transport, or a
    ``Server`` / ``MCPServer`` object (in memory). ``client_options`` go to ``mcp.Client``.

    ``prefix`` goes before each tool's name (``prefix="fs."`` makes ``read`` ``fs.read``);
    ``only`` names the server's tools to mount (all by default); ``hints`` gives the tools it
    names (by their names on the server) the host's annotations. Every other tool counts as
    destructive and open-world, MCP's defaults, whatever the server declares, unless
    ``trust_hints=True``: then the server's hints decide, and every call shows it.
    ``timeout`` bounds each call, in seconds; ``exposure`` is every mounted tool's; ``name``
    stands for the server when its handshake gives no name.

    Nothing is registered unless every tool passes the session's schema rules
    (``SchemaError`` names the tool and the keyword) and no name collides with another tool's
    (``ValueError``). After the block the tools stay registered, and a call to one ends as a
    failure saying the mount has ended. Example::

        async with mount(session, StdioServerParameters(command="my-server"), prefix="my."):
            await session.prompt("...")
    """
    raised: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            mounted = Mount(server, client_options or {}, nursery, name)
            try:
                specs = await mounted._specs(prefix=prefix, only=only, hints=dict(hints or {}),
                                             trust_hints=trust_hints, timeout=timeout,
                                             exposure=exposure)
                _check_collisions(session, specs)
                for spec in specs:
                    await session.register(spec)
                yield mounted
            except BaseException as exc:
                raised = exc
                raise
            finally:
                mounted._close()
    except BaseExceptionGroup as group:
        # the nursery wraps what the block raised: give the host its own exception
        if raised is not None and list(group.exceptions) == [raised]:
            raise raised from None
        raise
