"""A tool's own view in the console: the plain text its renderer gives shows, escaped, in the
call's view on the session's page; a renderer that fails leaves a one-line note, the default
view and a page that renders. ``toolledger web --plugin MODULE`` loads them as ``show`` does."""

from __future__ import annotations

import html
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.panel import Panel
from rich.text import Text

from engine import Session, ToolResult, approve_all, text, tool
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.present.render import Renderers
from events import JsonlStore, MemoryStore
from events.stores import EventStore
from tests.web.test_web_escaping import HOSTILE, check
from tests.web.webconsole import Console

SID = "views"
TOOLS = ("shown", "raising", "unprintable", "breaks_in_print")


class Unprintable:
    """A renderable that raises as rich prints it."""

    def __rich_console__(self, console: Any, options: Any) -> Any:
        raise ValueError("cannot lay this out")


async def calls(store: EventStore, said: str) -> None:
    """A session that called each of ``TOOLS`` once; each tool returns ``said``."""
    specs = []
    for name in TOOLS:
        @tool(name=name)
        async def run(call: Any, ctx: Any) -> ToolResult:
            """Say it."""
            return ToolResult(content=[text(said)])
        specs.append(run)
    model = FauxModel([*(faux_tool_call(name, {}) for name in TOOLS), faux_text("done")])
    async with Session.open(store, model=model, tools=specs, approver=approve_all,
                            session_id=SID, create=True) as session:
        await session.prompt("go")


def renderers() -> Renderers:
    views = Renderers()
    views.register("shown", lambda view: Panel(Text("OWN VIEW " + view.result.content[0].text)))
    views.register("raising", lambda view: 1 / 0)
    views.register("unprintable", lambda view: {"a": "dict"})
    views.register("breaks_in_print", lambda view: Unprintable())
    return views


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_a_renderers_text_shows_escaped_in_the_calls_view(hostile: str) -> None:
    store = MemoryStore()
    await calls(store, hostile)
    async with Console(store, renderers=renderers()) as console:
        page = await console.page("/session", id=SID)
    check(page)
    assert "OWN VIEW" in page
    assert '<pre class="text own">' in page
    if "<" in hostile:
        assert html.escape(hostile, quote=True) in page  # shown as text, never as markup


async def test_a_failing_renderer_leaves_a_note_and_the_default_view() -> None:
    store = MemoryStore()
    await calls(store, "plain result")
    async with Console(store, renderers=renderers()) as console:
        page = await console.page("/session", id=SID)
    check(page)
    assert "the renderer for raising failed (ZeroDivisionError: division by zero)" in page
    assert "the renderer for unprintable failed (TypeError: it returned a dict" in page
    assert ("the renderer for breaks_in_print failed (ValueError: cannot lay this out)"
            in page)
    assert page.count("plain result") >= len(TOOLS)  # every call's default view is there
    assert page.count('<pre class="text own">') == 1


async def test_without_renderers_no_call_has_its_own_view() -> None:
    store = MemoryStore()
    await calls(store, "plain result")
    async with Console(store) as console:
        page = await console.page("/session", id=SID)
    assert "OWN VIEW" not in page and "the renderer for" not in page


PLUGIN = """
from rich.text import Text
from engine.present.render import register_renderer

register_renderer("shown", lambda view: Text("PLUGIN VIEW of " + view.name))
"""


async def test_the_command_loads_plugins_as_show_does(tmp_path: Path) -> None:
    (tmp_path / "web_views.py").write_text(PLUGIN)
    log = tmp_path / "session.jsonl"
    with JsonlStore(log) as store:
        await calls(store, "plain result")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "web", str(log), "--port", "0",
         "--plugin", "web_views"],
        stderr=subprocess.PIPE, text=True, cwd=root,
        env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{tmp_path}"})
    try:
        assert process.stderr is not None
        url = next(line.strip() for line in process.stderr if "?token=" in line)
        async with httpx.AsyncClient(follow_redirects=True) as client:
            page = await client.get(url.replace("/?", "/session?id=" + SID + "&"))
        assert page.status_code == 200
        assert "PLUGIN VIEW of shown" in page.text
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert process.returncode == 0


def test_a_plugin_that_does_not_import_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["web", str(tmp_path / "log.jsonl"), "--port", "0", "--plugin", "no.such.mod"])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("toolledger: error: --plugin:") and err.count("\n") == 1
