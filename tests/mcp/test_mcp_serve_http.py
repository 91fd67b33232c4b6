"""``toolledger serve MODULE:NAME --http PORT`` in a subprocess, called by the official MCP
client over HTTP: it prints where it listens, serves until Ctrl-C (or SIGTERM), and leaves every
call ended in the log, one still running cancelled; it refuses what is not a port, and says so
of a port in use. It serves ``mcp_served:slow_session`` (tests/mcp_served.py)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from mcp import Client
from mcp_http_clients import MODES, check_the_log, check_what_the_client_saw, exercise

from engine import fold
from events import JsonlStore, Record

ROOT = Path(__file__).resolve().parents[2]


class Lines:
    """What a process writes to a stream, read as it comes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.seen = b""

    async def until(self, pattern: bytes) -> re.Match[bytes]:
        """Read until ``pattern`` matches a line; what matched (the stream ending first fails
        the test, showing what was read)."""
        while (found := re.search(pattern, self.seen, re.MULTILINE)) is None:
            chunk = await self.stream.receive_some()
            assert chunk, self.seen.decode()
            self.seen += chunk
        self.seen = self.seen[found.end():]
        return found


async def read_log(path: Path) -> list[Record]:
    store = JsonlStore(str(path))
    try:
        [session_id] = await store.sessions()
        return await store.read(session_id)
    finally:
        store.close()


@asynccontextmanager
async def toolledger_serve_http(log: Path, *args: str) -> AsyncIterator[tuple[Any, Lines, str]]:
    """``toolledger serve mcp_served:slow_session --http 0 ARGS`` in a subprocess, for the
    block: the process, its stderr and the endpoint's URL it printed there."""
    command = [sys.executable, "-m", "engine.cli", "serve", "mcp_served:slow_session",
               "--http", "0", *args]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(
            trio.run_process, command, stderr=subprocess.PIPE, check=False,
            cwd=str(ROOT / "tests"),
            env={**os.environ, "PYTHONPATH": str(ROOT), "SERVED_LOG": str(log)}))
        try:
            stderr = Lines(process.stderr)
            printed = await stderr.until(
                rb"^toolledger: serving (\S+) over MCP at (http://\S+:\d+/mcp) "
                rb"\(Ctrl-C stops\)$")
            yield process, stderr, printed.group(2).decode()
        finally:
            if process.returncode is None:
                process.kill()


async def test_toolledger_serve_http_serves_until_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    async with toolledger_serve_http(log, "--name", "served") as (process, stderr, url):
        check_what_the_client_saw(await exercise(url, "auto"), name="served",
                                  listed=("stat", "wipe", "hang"))
        process.send_signal(signal.SIGINT)
        await process.wait()
    assert process.returncode == 0
    check_the_log(await read_log(log))


@pytest.mark.parametrize("mode", MODES)
async def test_toolledger_serve_http_stopped_twice_cancels_the_call_in_flight(
    tmp_path: Path, mode: str,
) -> None:
    log = tmp_path / "served.jsonl"
    failures: list[BaseException] = []
    async with toolledger_serve_http(log) as (process, stderr, url):
        async with trio.open_nursery() as clients:
            async def call() -> None:
                try:
                    async with Client(url, mode=mode) as client:
                        await client.call_tool("hang", {})
                except Exception as exc:  # the server went away under it
                    failures.append(exc)

            clients.start_soon(call)
            await stderr.until(rb"^hang: running$")
            process.send_signal(signal.SIGINT)
            await stderr.until(rb"^toolledger: stopping: calls in flight have 3 s to finish "
                               rb"\(Ctrl-C again cancels them now\)$")
            process.send_signal(signal.SIGINT)
            await process.wait()
            clients.cancel_scope.cancel()
    assert process.returncode == 0
    state = fold(await read_log(log))
    assert {call_id: call.status for call_id, call in state.calls.items()} == {
        "h0": "cancelled"}
    assert state.open_calls == ()


async def test_toolledger_serve_http_on_another_address_answers_requests_addressed_to_it(
    tmp_path: Path,
) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with toolledger_serve_http(tmp_path / "served.jsonl", "--host", "127.0.0.2") as (
            process, stderr, url):
        assert url.startswith("http://127.0.0.2:")
        async with Client(url) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == [
                "stat", "wipe", "hang"]
        async with httpx.AsyncClient() as http:
            rebound = await http.post(url, headers={"Host": "attacker.example"}, json=ping)
        process.send_signal(signal.SIGINT)
        await process.wait()
    assert rebound.status_code == 421
    assert process.returncode == 0


def test_toolledger_serve_says_host_is_for_http(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    assert main(["serve", "mcp_served:session", "--host", "0.0.0.0"]) == 1
    assert capsys.readouterr().err == (
        "toolledger: error: --host is where --http listens: add --http PORT (over stdio there "
        "is nothing to listen on)\n")


@pytest.mark.parametrize(("args", "says"), [
    (["--http", "port"], "'port' is not a port: give a number from 1 to 65535, or 0"),
    (["--http", "65536"], "'65536' is not a port"),
])
def test_toolledger_serve_http_refuses_what_is_not_a_port(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    assert main(["serve", "mcp_served:session", *args]) == 2
    assert says in capsys.readouterr().err


def test_toolledger_serve_http_on_a_port_in_use_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "mcp_served:session", "--http", str(port)]) == 1
    err = capsys.readouterr().err
    assert err == (f"toolledger: error: cannot listen on 127.0.0.1 port {port}: Address "
                   f"already in use (choose another --http PORT, 0 for any free one, or "
                   f"another --host)\n")


def test_toolledger_serve_http_without_hypercorn_says_which_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine.cli import main

    for name in ("hypercorn", "hypercorn.config", "hypercorn.trio"):
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    assert main(["serve", "mcp_served:session", "--http", "0"]) == 1
    assert capsys.readouterr().err == (
        "toolledger: error: serve --http needs hypercorn: install toolledger's http extra "
        "(pip install 'toolledger[http]')\n")
