"""``toolledger web LOG`` serves the console with Hypercorn under trio, on 127.0.0.1, at the
URL it prints with this start's token, and stops on Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from engine.cli import main
from events import JsonlStore
from tests.web.webconsole import SID, deleting, paused


async def test_the_command_prints_a_url_with_its_token_and_serves_the_log(
        tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    with JsonlStore(log) as store:
        await paused(store, deleting())
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "web", str(log), "--port", "0"],
        stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        assert process.stderr is not None
        url = ""
        for line in process.stderr:  # the URL is printed once the server listens
            if "?token=" in line:
                url = line.strip()
                break
        assert url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(follow_redirects=True) as client:
            page = await client.get(url)
            assert page.status_code == 200 and SID in page.text
            assert "approval of delete_file" in page.text
            bare = await client.get(url.split("?")[0])
            assert bare.status_code == 200  # the cookie the token gave
        async with httpx.AsyncClient() as stranger:
            assert (await stranger.get(url.split("?")[0])).status_code == 403
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert process.returncode == 0


def test_a_port_in_use_is_one_line_naming_the_option(tmp_path: Path, capsys: object) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        status = main(["web", str(tmp_path / "log.jsonl"), "--port",
                       str(taken.getsockname()[1])])
    finally:
        taken.close()
    assert status == 1
    assert "--port PORT" in capsys.readouterr().err  # type: ignore[attr-defined]
