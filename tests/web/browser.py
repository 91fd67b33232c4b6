"""The console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven through Selenium, and the console served for real by Hypercorn
under trio on a free loopback port.

Selenium blocks, so every step of the browser runs in a thread (:mod:`trio.to_thread`) while
the test's trio tasks serve the console and run the sessions. A step that waits for the page
waits on a condition of the page (Selenium's ``WebDriverWait``), never for a fixed time.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

T = TypeVar("T")

#: Set to ``1`` (as .ci/run does) to fail, not skip, when no browser can be started here.
REQUIRE_VARIABLE = "TOOLLEDGER_REQUIRE_BROWSER"
#: The browser and its driver: Debian's packages, unless these variables name others.
CHROMIUM = os.environ.get("TOOLLEDGER_CHROMIUM", "chromium")
CHROMEDRIVER = os.environ.get("TOOLLEDGER_CHROMEDRIVER", "chromedriver")
#: What lets Chromium start here: no sandbox (root, containers), no GPU, nothing fetched.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
#: The window's size (CSS pixels) at the start of each test.
WINDOW = (1280, 900)
#: How long (seconds) a step waits for the page before the test fails.
PATIENCE = 60


class BrowserUnavailable(Exception):
    """No browser can be started here; the message says why and what to install."""


def start_chromium(profile: str) -> Any:
    """A headless Chromium with a fresh profile in the folder ``profile``, keeping the page's
    console log (``get_log("browser")``). :class:`BrowserUnavailable` if it is not installed."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserUnavailable("selenium is not installed (pip install "
                                 "'toolledger[test]')") from None
    chromium, driver = shutil.which(CHROMIUM), shutil.which(CHROMEDRIVER)
    if chromium is None or driver is None:
        missing = CHROMIUM if chromium is None else CHROMEDRIVER
        raise BrowserUnavailable(
            f"{missing} is not on the PATH (Debian: apt-get install chromium chromium-driver; "
            f"or set TOOLLEDGER_CHROMIUM and TOOLLEDGER_CHROMEDRIVER)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:  # the driver's path is given, so Selenium never downloads one
        return webdriver.Chrome(options=options, service=Service(executable_path=driver))
    except WebDriverException as exc:  # installed but broken: an error, not a skip
        raise RuntimeError(f"{chromium} did not start through {driver}: {exc.msg}") from None


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` served by Hypercorn under trio on a free loopback port, for the block: its
    base URL. The socket listens before the block starts, so the browser may connect at once."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listening.detach()}"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0  # a live page holds a stream open
    stopping = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve, app, config,
                                              shutdown_trigger=stopping.wait))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stopping.set()


class Browser:
    """One Chromium window on a served console, its steps as trio functions."""

    def __init__(self, driver: Any, base: str) -> None:
        self.driver = driver
        self.base = base

    async def _run(self, step: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(step)

    async def enter(self, token: str) -> None:
        """Open the console's URL with its token, as a person does once: the cookie stays."""
        await self.open(f"/?token={token}")

    async def open(self, path: str) -> None:
        await self._run(lambda: self.driver.get(self.base + path))

    async def _until(self, css: str, text: str, act: Callable[[Any], object]) -> None:
        """Until an element matching ``css`` whose text holds ``text`` is on the page, then
        ``act`` on it. The live script may swap the page's live part at any moment: an
        element swapped out (stale) is looked for again."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        def done(driver: Any) -> bool:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if text in element.text:
                    act(element)
                    return True
            return False

        await self._run(lambda: WebDriverWait(
            self.driver, PATIENCE, ignored_exceptions=(StaleElementReferenceException,)).until(
                done, f"no {css!r} holding {text!r} on {self.driver.current_url}"))

    async def wait_for(self, css: str, text: str = "") -> str:
        """The text of the first element matching ``css`` whose text holds ``text``, once the
        page has one."""
        shown: list[str] = []
        await self._until(css, text, lambda element: shown.append(element.text))
        return shown[-1]

    async def wait_gone(self, css: str) -> None:
        """Until no element matches ``css``."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        await self._run(lambda: WebDriverWait(self.driver, PATIENCE).until(
            lambda d: not d.find_elements(By.CSS_SELECTOR, css), f"{css!r} stays"))

    async def click(self, css: str, text: str = "") -> None:
        await self._until(css, text, lambda element: element.click())

    async def type(self, css: str, words: str, *, clear: bool = False) -> None:
        def typing(element: Any) -> None:
            if clear:
                element.clear()
            element.send_keys(words)

        await self._until(css, "", typing)

    async def script(self, source: str) -> Any:
        return await self._run(lambda: self.driver.execute_script(source))

    async def console_errors(self) -> list[str]:
        """What the pages wrote to the browser's console as errors since the last call:
        a script or style the Content-Security-Policy blocked, a script that threw, a
        resource that failed."""
        logged = await self._run(lambda: self.driver.get_log("browser"))
        return [entry["message"] for entry in logged if entry["level"] == "SEVERE"]

    async def leave(self) -> None:
        """Leave the console (closing its live stream) for an empty page."""
        await self._run(lambda: self.driver.get("about:blank"))


@asynccontextmanager
async def console_in_browser(driver: Any, app: Any, token: str) -> AsyncIterator[Browser]:
    """``app`` served for real and the browser inside it (through its token), for the block;
    at the end the browser leaves, and its console must show no error."""
    async with serving(app) as base:
        browser = Browser(driver, base)
        await browser.console_errors()  # what an earlier test left
        await trio.to_thread.run_sync(lambda: driver.set_window_size(*WINDOW))
        await browser.enter(token)
        yield browser
        errors = await browser.console_errors()
        await browser.leave()
        assert errors == [], errors


def profile_folder() -> str:
    return tempfile.mkdtemp(prefix="toolledger-chromium-")
