"""Mount an MCP server: its tools registered in a session, each call made through the official
client, and governed and logged like a local tool's.

A mounted tool is an ordinary :class:`~engine.core.tools.ToolSpec` whose body asks the server: the
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
- **Listing** is bounded (:class:`~engine.mcp.ListingLimits`: time, pages, tools, bytes of
  declarations): a server that never answers ``tools/list`` or pages forever stops the mount
  with a :class:`~engine.mcp.ListingError`, and a mount the host cancels ends as its
  ``trio.Cancelled``, never as a group of the SDK's errors.
- **Progress.** Each call asks the server for progress; each ``notifications/progress`` it
  sends becomes a ``tool_progress`` of the call (:mod:`engine.mcp.progress`).
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

import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, Protocol, TypeVar

import trio

from events.results import ToolResult
from events.types import Annotations, Exposure

from ..core.toolcontext import ToolContext
from ..core.tools import ToolSpec
from ..runtime.session import Session
from ._sdk import mcp, mcp_types
from .client import leave_output_to_the_session, reason
from .declarations import MountChoices, declared_specs
from .errors import ServerChanged
from .formats import result_from_mcp
from .listing import ListingLimits, list_tools
from .names import MountedBody, check_names
from .questions import Elicited
from .progress import reported_to

__all__ = ["Hosted", "Mount", "ServerChanged", "mount"]

T = TypeVar("T")


class Mount:
    """One mounted MCP server: its identity, the session's names for its tools, and the
    connection their calls use (opened again after it broke, and the server read again)."""

    def __init__(self, session: Session, server: Any, choices: MountChoices,
                 client_options: Mapping[str, Any], nursery: trio.Nursery,
                 name: str | None) -> None:
        self._session = session
        self._server = server
        self._choices = choices
        #: the server's elicitation requests go to the running call's question
        self._elicited = Elicited(name or "mcp server")
        self._options = {"elicitation_callback": self._elicited, **client_options}
        self._nursery = nursery
        self._client: mcp.Client | None = None
        self._stop = trio.Event()
        self._connecting = trio.Lock()
        self._closed = False
        self._name = name or "mcp server"
        self._label = repr(name) if name else _described(server)  # before the handshake
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

    @property
    def identity(self) -> str:
        """The server's name and version as messages give them (``'calculator' 1.2.0``)."""
        return f"{self.server!r} {self.version}" if self.version else repr(self.server)

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
                leave_output_to_the_session(client)
                self._client, self._stop = client, stop
                task_status.started(client)
                started = True
                await stop.wait()
        except Exception as exc:
            if not started:
                # the SDK's task groups wrap the reason in groups: say it once, plainly
                raise ConnectionError(f"could not connect to the MCP server {self._label}: "
                                      f"{reason(exc)}") from exc
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

    async def call(self, tool: str, arguments: Any, *, body: MountedBody | None = None,
                   ctx: ToolContext | None = None) -> ToolResult:
        """Call the server's tool ``tool`` (its name on the server) and return its result.
        With ``ctx`` (the running call's), the server is asked for progress, and each update
        it sends becomes a ``tool_progress`` of the call (:func:`engine.mcp.progress.reported_to`);
        an elicitation request the server sends for it (in an input-required result of MCP
        2026-07-28, which the client's ``call_tool`` answers in this task, or on the
        handshake's stream) becomes the call's question (:class:`engine.mcp.questions.Elicited`).

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
            with nullcontext() if ctx is None else self._elicited.running(ctx):
                result = await client.call_tool(
                    tool, arguments,
                    progress_callback=None if ctx is None else reported_to(ctx))
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
        listed = await list_tools(client, self._choices.listing, self.server)
        return declared_specs(listed, self._choices, server=self.server, version=self.version,
                              body=lambda tool: MountedBody(self, tool), strict=strict)

    async def _mount(self) -> None:
        """Connect, read the server and register its tools: all of them, or none. Connecting
        and listing are bounded by the listing's timeout, each."""
        timeout = self._choices.listing.timeout
        with trio.move_on_after(timeout) as waited:
            client = await self._connected()
        if waited.cancelled_caught:
            raise ConnectionError(f"could not connect to the MCP server {self._label} within "
                                  f"{timeout} s (listing=ListingLimits(timeout=...) allows more)")
        specs = await self._declared(client, strict=True)
        check_names(self._session, specs, self)
        for spec in specs:
            await self._session.register(spec)
            assert spec.source is not None
            self._registered[spec.source.tool] = spec

    async def _reread(self, client: mcp.Client) -> None:
        """After a reconnect: read the server again, and register again every tool it now
        declares otherwise (another server, another version, other schemas or hints), so that
        the next call is judged by that. A call judged before fails (:meth:`call`)."""
        before = self.identity
        now = {spec.source.tool: spec for spec in await self._declared(client, strict=False)
               if spec.source is not None}
        after = self.identity
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
        check_names(self._session, changed, self)
        for spec in changed:
            await self._session.register(spec)
            assert spec.source is not None
            self._registered[spec.source.tool] = spec


@asynccontextmanager
async def mount(
    session: Session | Hosted,
    server: Any,
    *,
    prefix: str = "",
    only: Iterable[str] | None = None,
    hints: Mapping[str, Annotations] | None = None,
    trust_hints: bool = False,
    timeout: float | None = 60.0,
    exposure: Exposure = "direct",
    name: str | None = None,
    listing: ListingLimits | None = None,
    client_options: Mapping[str, Any] | None = None,
) -> AsyncIterator[Mount]:
    """Connect to an MCP server and register its tools in ``session`` for the block's length.

    ``server`` is what the SDK's :class:`mcp.Client` connects to: a URL (streamable HTTP), a
    :class:`mcp.StdioServerParameters` (a subprocess over stdio), any transport, or a
    ``Server`` / ``MCPServer`` object (in memory). ``client_options`` go to ``mcp.Client``.

    ``prefix`` goes before each tool's name (``prefix="fs_"`` makes ``read`` ``fs_read``);
    ``only`` names the server's tools to mount (all by default); ``hints`` gives the tools it
    names (by their names on the server) the host's annotations. Every other tool counts as
    destructive and open-world, MCP's defaults, whatever the server declares, unless
    ``trust_hints=True``: then the server's hints decide, and every call shows it.
    ``timeout`` bounds each call, in seconds; ``exposure`` is every mounted tool's; ``name``
    stands for the server when its handshake gives no name. ``listing`` bounds what the mount
    reads of the server's tool list (:class:`~engine.mcp.ListingLimits`: 30 s, 100 pages,
    1 000 tools, 4 MB of declarations by default), here and after every reconnect.

    ``session`` is an :class:`engine.Session`, or an :class:`engine.hosts.aio.Session` from
    asyncio code: the mount then runs in the session's trio run on the host's loop (held
    open by :meth:`~engine.hosts.aio.Session.in_trio`), with the same timeouts and limits,
    and the block is asyncio code; cancelling the task that mounts cancels the mount.

    Nothing is registered unless the server connects (``ConnectionError``), lists its tools
    within the limits (:class:`~engine.mcp.ListingError`), every tool passes the session's
    schema rules (``SchemaError`` names the tool and the keyword) and no name collides with
    another tool's (``ValueError``, naming both: a local tool, a tool of another mount that is
    open, another server's tool in the log). A mount the host cancels ends as its
    ``trio.Cancelled`` (from asyncio, as its ``CancelledError``). After the block the tools
    stay registered, and a call to one ends as a failure saying the mount has ended.
    Example::

        async with mount(session, StdioServerParameters(command="my-server"), prefix="my_"):
            await session.prompt("...")
    """
    choices = MountChoices(prefix=prefix, only=None if only is None else tuple(only),
                           hints=dict(hints or {}), trust_hints=trust_hints, timeout=timeout,
                           exposure=exposure, listing=listing or ListingLimits())
    mounting = functools.partial(_mounted, server=server, choices=choices,
                                 client_options=client_options or {}, name=name)
    if isinstance(session, Session):
        async with mounting(session) as mounted:
            yield mounted
    elif callable(getattr(session, "in_trio", None)):
        async with session.in_trio(mounting) as mounted:
            yield mounted
    else:
        raise TypeError(f"mount() mounts a server in an engine.Session (from trio) or an "
                        f"engine.hosts.aio.Session (from asyncio), not in a "
                        f"{type(session).__name__}")


class Hosted(Protocol):
    """A session driven from another event loop, :class:`engine.hosts.aio.Session`: what
    :func:`mount` needs of it is a way to hold the mount open in the session's trio run."""

    def in_trio(self, enter: Callable[[Session], AbstractAsyncContextManager[T]],
                ) -> AbstractAsyncContextManager[T]: ...


@asynccontextmanager
async def _mounted(session: Session, *, server: Any, choices: MountChoices,
                   client_options: Mapping[str, Any], name: str | None,
                   ) -> AsyncIterator[Mount]:
    """:func:`mount`, in the trio run of ``session``."""
    raised: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            mounted = Mount(session, server, choices, client_options, nursery, name)
            try:
                try:
                    await mounted._mount()
                except Exception:
                    # a connection that a cancellation closed fails a request in flight with
                    # the SDK's error: the mount ends as the cancellation, not as that
                    await trio.lowlevel.checkpoint_if_cancelled()
                    raise
                yield mounted
            except BaseException as exc:
                raised = exc
                raise
            finally:
                mounted._close()
    except BaseExceptionGroup as group:
        # the nursery wraps what the block raised, and a cancellation, once for each of its
        # tasks: give the host its own exception, or the cancellation, as itself
        alone = _alone(group, raised)
        if alone is None:
            raise
        raise alone from None


def _described(server: Any) -> str:
    """``server`` (what :func:`mount` was given) in a few words, for a message."""
    if isinstance(server, str):
        return repr(server)
    command = getattr(server, "command", None)
    if isinstance(command, str):
        return f"started by {' '.join([command, *getattr(server, 'args', [])])!r}"
    return f"of {type(server).__name__}"


def _alone(group: BaseExceptionGroup[BaseException], raised: BaseException | None,
           ) -> BaseException | None:
    """The one exception ``group`` stands for: what the block raised (``raised``), with no
    other but cancellations beside it, or a cancellation alone; else ``None``."""
    leaves: list[BaseException] = []
    groups: list[BaseExceptionGroup[BaseException]] = [group]
    while groups:
        for exc in groups.pop().exceptions:
            if isinstance(exc, BaseExceptionGroup):
                groups.append(exc)
            else:
                leaves.append(exc)
    others = [leaf for leaf in leaves if not isinstance(leaf, trio.Cancelled)]
    if raised is not None and others in ([raised], []) and raised in leaves:
        return raised
    return leaves[0] if not others and leaves else None
