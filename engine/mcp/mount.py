"""Mount an MCP server: its tools registered in a session, each call made through the official
client, and governed and logged like a local tool's.

A mounted tool is an ordinary :class:`~engine.tools.ToolSpec` whose body asks the server: the
session checks its schemas by its own rules when it is registered, validates the arguments,
runs the ``tool_call`` handlers, the policy and the approver, and records every step, as for
any tool. A server is someone else's code, and what it says about itself is input
(docs/mcp.md, "Trust"). What is particular to a server lives here:

- **Names.** ``prefix`` is put before every tool's name. A server's name proves nothing, so
  no mounted tool takes a name the session has for a local tool, for a tool another open
  mount holds, or (in the log) for another server's tool: the mount is refused, naming both.
- **Hints** are the server's word, which nothing checks, and MCP says a client must not trust
  an untrusted server's: a mounted tool's policy reads MCP's defaults (destructive and
  open-world, so the policy asks) whatever the server declares. ``hints`` gives tools the
  host's own hints; ``trust_hints=True`` takes the server's at its word, an explicit choice.
- **Identity.** The server's name and version from its handshake are recorded with each tool's
  registration (:class:`~events.types.ToolSource`, beside the tool's name on the server, the
  hints it declared and whether the host trusted them), so every call in the log names the
  server that answered it, and ``toolledger show`` says what it claimed. After a reconnect
  the mount reads the server's identity and tools again: a tool declared otherwise now (by
  another server, or another version, or with other schemas or hints) is registered again,
  through the session, and judged by that from the next call on; the call that met the change
  was judged by the old declaration, so it fails (:class:`ServerChanged`) and never reaches
  the new server.
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

import re
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from events.results import ToolResult
from events.types import Annotations, Exposure

from ..context import ToolContext
from ..session import Session
from ..tools import ToolCall, ToolSpec
from ._sdk import mcp, mcp_types
from .declarations import MountChoices, declared_specs
from .formats import result_from_mcp

__all__ = ["Mount", "ServerChanged", "mount"]


class ServerChanged(RuntimeError):
    """A mounted tool's call that met a server which, since the call was judged, reconnected
    as another server, or declares the tool otherwise, or no longer lists it: the call was not
    made. The message says what changed; the tool is registered again as declared now."""


class Mount:
    """One mounted MCP server: its identity, the session's names for its tools, and the
    connection their calls use (opened again after it broke, and the server read again)."""

    def __init__(self, session: Session, server: Any, choices: MountChoices,
                 client_options: Mapping[str, Any], nursery: trio.Nursery,
                 name: str | None) -> None:
        self._session = session
        self._server = server
        self._choices = choices
        self._options = dict(client_options)
        self._nursery = nursery
        self._client: mcp.Client | None = None
        self._stop = trio.Event()
        self._connecting = trio.Lock()
        self._closed = False
        self._name = name or "mcp server"
        #: the specs this mount registered, by the tools' names on the server
        self._registered: dict[str, ToolSpec] = {}
        #: why a tool registered before cannot be called now (a server that changed)
        self._changed: dict[str, str] = {}
        #: the server's name from its handshake (``name`` stands in when it gives none)
        self.server: str = self._name
        #: the server's version from its handshake
        self.version: str | None = None

    @property
    def tools(self) -> Mapping[str, str]:
        """The session's names for the mounted tools, by their names on the server."""
        return {tool: spec.name for tool, spec in self._registered.items()}

    @property
    def closed(self) -> bool:
        """Whether the block of :func:`mount` has ended (the tools can no longer be called)."""
        return self._closed

    def _identity(self, server: str | None = None, version: str | None = None) -> str:
        server, version = server or self.server, version or self.version
        return f"{server!r} {version}" if version else repr(server)

    async def _connected(self) -> mcp.Client:
        """The live connection, made (again) if there is none. A connection made again reads
        the server again (:meth:`_reread`) before any call uses it."""
        async with self._connecting:
            if self._client is None:
                if self._closed:
                    raise RuntimeError(
                        f"the mount of the MCP server {self.server!r} has ended: its tools "
                        f"can be called only inside the block of mount()")
                client: mcp.Client = await self._nursery.start(self._run)
                if self._registered:  # a reconnect: the server may be another one now
                    try:
                        await self._reread(client)
                    except BaseException:
                        self._lost(client)  # nothing learnt: the next call reads it again
                        raise
            assert self._client is not None
            return self._client

    async def _run(self, *, task_status: trio.TaskStatus[mcp.Client] = trio.TASK_STATUS_IGNORED,
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
                task_status.started(client)
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

    async def call(self, tool: str, arguments: Any, *, body: _Body | None = None) -> ToolResult:
        """Call the server's tool ``tool`` (its name on the server) and return its result.

        This is the body of every mounted tool (``body``, the one the session runs: the call
        is made only if the server still declares the tool as it did when ``body`` was
        registered); it raises for whatever is not a result: :class:`ServerChanged` for a
        server that changed, ``ConnectionError`` for a connection that closed during the call,
        the SDK's ``MCPError`` for a protocol error. The result's structured content is the
        session's to check against the tool's output schema, as a local tool's is."""
        client = await self._connected()
        if body is not None:
            spec = self._registered.get(tool)
            if spec is None or spec.execute is not body:
                raise ServerChanged(self._changed.get(
                    tool, f"the MCP server {self.server!r}'s tool {tool!r} is not mounted"))
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

    async def _declared(self, client: mcp.Client, *, strict: bool) -> list[ToolSpec]:
        """What the server is (its handshake) and the specs of the tools it lists that the
        host chose, checked by the session's schema rules (see :func:`declared_specs`)."""
        info = client.server_info
        if info is not None:
            self.server, self.version = info.name, info.version or None
        else:
            self.server, self.version = self._name, None
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return declared_specs(listed, self._choices, server=self.server, version=self.version,
                              body=lambda tool: _Body(self, tool), strict=strict)

    async def _mount(self) -> None:
        """Connect, read the server and register its tools: all of them, or none."""
        specs = await self._declared(await self._connected(), strict=True)
        _check_collisions(self._session, specs, self)
        for spec in specs:
            await self._session.register(spec)
            assert spec.source is not None
            self._registered[spec.source.tool] = spec

    async def _reread(self, client: mcp.Client) -> None:
        """After a reconnect: read the server again, and register again every tool it now
        declares otherwise (another server, another version, other schemas or hints), so that
        the next call is judged by that. A call judged before fails (:meth:`call`)."""
        before = self._identity()
        now = {spec.source.tool: spec for spec in await self._declared(client, strict=False)
               if spec.source is not None}
        after = self._identity()
        changed = []
        for tool, old in list(self._registered.items()):
            new = now.get(tool)
            if new == old:
                continue
            if after != before:
                change = f"the MCP server {before} came back as {after} after a reconnect"
            elif new is not None:
                change = (f"the MCP server {after} declares its tool {tool!r} otherwise since "
                          f"it reconnected")
            else:
                change = (f"the MCP server {after} no longer lists its tool {tool!r} since it "
                          f"reconnected")
            if new is None:
                del self._registered[tool]
                self._changed[tool] = f"{change}: {old.name} cannot be called"
                continue
            self._changed[tool] = (
                f"{change}: this call of {old.name} was judged by what the tool declared "
                f"before, so it was not made; {new.name} is registered again as the server "
                f"declares it now, and the next call is judged by that")
            changed.append(new)
        _check_collisions(self._session, changed, self)
        for spec in changed:
            await self._session.register(spec)
            assert spec.source is not None
            self._registered[spec.source.tool] = spec


class _Body:
    """The body of one mounted tool, as registered: it asks the server through its mount,
    which makes the call only while the server declares the tool as it did then."""

    def __init__(self, mount: Mount, tool: str) -> None:
        self.mount = mount
        self.tool = tool

    async def __call__(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return await self.mount.call(self.tool, call.arguments, body=self)

    def __repr__(self) -> str:
        return f"<the MCP server {self.mount.server!r}'s tool {self.tool!r}>"


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


def _holder(session: Session, spec: ToolSpec, mount: Mount) -> str | None:
    """What already has ``spec``'s name and keeps it from ``mount``, in words; ``None`` if the
    name is free for it: no tool has it, or ``mount`` itself registered it, or a mount that
    ended did, or the log's registration from an earlier process names the same server tool
    (a session reopened gives its mounted tools their names again)."""
    live = session.specs.get(spec.name)
    if live is not None:
        body = live.execute
        if isinstance(body, _Body) and body.mount is mount:
            return None
        if not isinstance(body, _Body):
            return "a tool the host registered"
        if not body.mount.closed:
            return (f"the tool {body.tool!r} of the MCP server {body.mount._identity()}, "
                    f"which another mount holds while its block is open")
    known = session.state.tools.get(spec.name)
    if known is None:
        return None
    if known.source is None:
        return "a local tool"
    assert spec.source is not None
    if (known.source.server, known.source.tool) != (spec.source.server, spec.source.tool):
        return f"the tool {known.source.tool!r} of the MCP server {known.source.server!r}"
    return None


def _check_collisions(session: Session, specs: Iterable[ToolSpec], mount: Mount) -> None:
    """A mounted tool may take no name another tool has (see :func:`_holder`): the mount is
    refused with a ``ValueError`` naming both, before anything is registered."""
    for spec in specs:
        holder = _holder(session, spec, mount)
        if holder is None:
            continue
        assert spec.source is not None
        suggested = re.sub(r"[^A-Za-z0-9_-]+", "_", spec.source.server).strip("_")[:32]
        raise ValueError(
            f"the MCP server {mount._identity()} cannot be mounted: its tool "
            f"{spec.source.tool!r} would be named {spec.name!r}, and that is the name of "
            f"{holder}. A server's name proves nothing, so no server's tool takes the name "
            f"of another tool: mount it with a prefix, e.g. "
            f"prefix={(suggested or 'mcp') + '_'!r}")


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
    (``ValueError``, naming both: a local tool, a tool of another mount that is open, another
    server's tool in the log). After the block the tools stay registered, and a call to one
    ends as a failure saying the mount has ended. Example::

        async with mount(session, StdioServerParameters(command="my-server"), prefix="my."):
            await session.prompt("...")
    """
    choices = MountChoices(prefix=prefix, only=None if only is None else tuple(only),
                           hints=dict(hints or {}), trust_hints=trust_hints, timeout=timeout,
                           exposure=exposure)
    raised: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            mounted = Mount(session, server, choices, client_options or {}, nursery, name)
            try:
                await mounted._mount()
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

