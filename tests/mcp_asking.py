"""An MCP server built with the official SDK whose tools ask the person, for the tests of
questions through a mount (tests/mcp/test_mcp_mount_rounds.py).

``asking_server()`` asks through the SDK's resolvers (``Resolve(Elicit(...))``), which ask in
an input-required result on MCP 2026-07-28 and with an ``elicitation/create`` request on the
handshake's protocol: ``choose(tag)`` asks once, ``choose_twice(tag)`` asks again after the
first answer (a second round). ``pairing_server()`` asks in its tool's body
(``ctx.elicit``, the handshake's protocol only), and only once two calls of it are in the
body at once. Run as a script it serves ``asking_server()`` over stdio, with ``http`` over
streamable HTTP on a free loopback port (uvicorn names the URL on stderr), or with
``pairing`` serves ``pairing_server()`` over stdio.
"""

from __future__ import annotations

import sys
from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel


class Target(BaseModel):
    branch: str


class Sure(BaseModel):
    sure: bool


def ask_branch() -> Elicit[Target]:
    return Elicit("Which branch?", Target)


def ask_sure(
    target: Annotated[ElicitationResult[Target], Resolve(ask_branch)],
) -> Elicit[Sure]:
    branch = target.data.branch if target.action == "accept" else "nothing"
    return Elicit(f"Deploy {branch}?", Sure)


def said(answer: ElicitationResult[Target] | ElicitationResult[Sure]) -> str:
    if answer.action == "accept":
        return ",".join(f"{k}={v}" for k, v in answer.data.model_dump().items())
    return answer.action


def asking_server() -> MCPServer:
    """A server named "asker", version "1.0"."""
    server = MCPServer("asker", version="1.0")
    read_only = types.ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=read_only)
    async def choose(tag: str,
                     target: Annotated[ElicitationResult[Target], Resolve(ask_branch)]) -> str:
        """Ask which branch."""
        return f"{tag}: {said(target)}"

    @server.tool(annotations=read_only)
    async def choose_twice(
        tag: str,
        target: Annotated[ElicitationResult[Target], Resolve(ask_branch)],
        sure: Annotated[ElicitationResult[Sure], Resolve(ask_sure)],
    ) -> str:
        """Ask which branch, then whether to deploy it."""
        return f"{tag}: {said(target)} / {said(sure)}"

    return server


def pairing_server() -> MCPServer:
    """A server named "pairing", version "1.0"."""
    server = MCPServer("pairing", version="1.0")
    inside = [0]
    both = anyio.Event()

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    async def pick(ctx: Context) -> str:
        """Ask which branch, once another call is here too."""
        inside[0] += 1
        if inside[0] == 2:
            both.set()
        await both.wait()
        result = await ctx.elicit("Which branch?", Target)
        return f"picked {result.data.branch}" if result.action == "accept" else result.action

    return server


if __name__ == "__main__":
    if sys.argv[1:] == ["pairing"]:
        pairing_server().run()
    elif sys.argv[1:] == ["http"]:
        asking_server().run("streamable-http", host="127.0.0.1", port=0)
    else:
        asking_server().run()
