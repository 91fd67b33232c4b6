"""Running an app's lifespan around a block (``engine.web.lifespan``): the console's
background nursery is open inside it and closed after; an app that fails to start says why."""

from __future__ import annotations

from typing import Any

import pytest

from engine.web import lifespan
from events import MemoryStore
from tests.web.webconsole import Console


async def test_the_console_folds_in_the_background_only_while_its_lifespan_runs() -> None:
    console = Console(MemoryStore())
    inner: Any = console.app.app  # the Starlette app behind the guard
    sessions = inner.router.lifespan_context.__self__.sessions
    assert sessions.nursery is None
    async with lifespan(console.app):
        assert sessions.nursery is not None
    assert sessions.nursery is None


async def test_an_app_that_fails_to_start_says_why() -> None:
    async def failing(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    with pytest.raises(RuntimeError, match="the app did not start: no database"):
        async with lifespan(failing):
            pass
