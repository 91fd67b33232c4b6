"""Screenshots of the web console's main pages, for docs/web.md.

    python3 tasks.py screenshots [DIR]        (or: python -m tests.web.screenshots DIR)

writes ``sessions.png`` (the list), ``session.png`` (a session waiting for an approval, its
transcript beside its call tree), ``question.png`` (a question's form) and ``pending.png``
(every approval and question that waits) into DIR (default docs/screenshots), taken in headless
Chromium (as the browser tests take it, tests/web/browser.py) on a log made here.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.web import console_app
from events import JsonlStore
from events.stores import EventStore
from tests.web.browser import Browser, console_in_browser, profile_folder, start_chromium
from tests.web.webconsole import Tools, paused

#: The width of every shot (CSS pixels); the height is the page's, up to MAX_HEIGHT.
WIDTH = 1200
MAX_HEIGHT = 1400


async def make_log(store: EventStore) -> None:
    """A finished session with calls, one paused at an approval, one paused at a question."""
    tools = Tools()
    model = FauxModel([faux_tool_call("delete_file", {"path": "build/old.log"}),
                       faux_tool_call("delete_file", {"path": "build/cache.db"}),
                       faux_text("Removed the two stale build files.")])
    async with Session.open(store, model=model, tools=tools.specs, approver=approve_all,
                            session_id="cleanup-build", create=True) as session:
        await session.prompt("Remove the stale files from build/.")
    await paused(store, faux_tool_call("deploy"), session_id="release-2.4")
    await paused(store, faux_tool_call("delete_file", {"path": "notes/2024.md"}),
                 session_id="tidy-notes")


async def shoot(browser: Browser, path: str, out: Path) -> None:
    await trio.to_thread.run_sync(lambda: browser.driver.set_window_size(WIDTH, 300))
    await browser.open(path)  # in a short window, so that the page's height is its own
    await browser.wait_for("main#live")
    height = int(await browser.script("return document.documentElement.scrollHeight"))
    frame = 300 - int(await browser.script("return window.innerHeight"))  # the window's own
    await trio.to_thread.run_sync(lambda: browser.driver.set_window_size(
        WIDTH, min(height + frame, MAX_HEIGHT)))
    await trio.to_thread.run_sync(lambda: browser.driver.save_screenshot(str(out)))


#: The pages shot, by the file each is written to.
PAGES = {"sessions.png": "/", "session.png": "/session?id=tidy-notes",
         "question.png": "/session?id=release-2.4", "pending.png": "/pending"}


async def shoot_all(driver: Any, out: Path) -> None:
    """Each of :data:`PAGES` through ``driver``, into the folder ``out``, of a log made here."""
    out.mkdir(parents=True, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="toolledger-screenshots-")
    store = JsonlStore(Path(folder) / "runs.jsonl")  # hash-chained: the badge shows it
    try:
        await make_log(store)
        token = secrets.token_urlsafe()
        async with console_in_browser(driver, console_app(store, token=token),
                                      token) as browser:
            for name, path in PAGES.items():
                await shoot(browser, path, out / name)
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


async def main(out: Path) -> None:
    profile = profile_folder()
    driver = start_chromium(profile)
    try:
        await shoot_all(driver, out)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.web.screenshots OUT_DIR")
    trio.run(main, Path(sys.argv[1]))
    print(f"wrote {', '.join(PAGES)} into {sys.argv[1]}")
