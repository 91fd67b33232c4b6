"""toolledger's pytest plugin: fixtures for testing tools, handlers and policies.

Installed with the package (the ``pytest11`` entry point ``toolledger``), so any test suite
that has toolledger gets these fixtures without a ``conftest.py``:

``faux_model``
    A factory: ``faux_model([faux_tool_call("x", {...}), faux_text("done")])`` is a
    :class:`~engine.models.FauxModel` with that script. The models it made are in
    ``faux_model.made``; ``faux_model.assert_complete()`` checks that each used its whole
    script.
``memory_store``
    A fresh :class:`~events.MemoryStore` (closed after the test).
``session_factory``
    Opens sessions on ``memory_store`` with a counting clock and session ids
    ``"session-1"``, ``"session-2"``, …, so two runs of a test write the same log::

        async def test_stat(session_factory, faux_model):
            model = faux_model([faux_tool_call("stat_file", {"path": "x"}), faux_text("ok")])
            async with session_factory(tools=[stat_file], model=model) as session:
                await session.prompt("go")

    Keyword arguments go to :meth:`engine.Session.open` (``approver=``, ``rules=``,
    ``store=`` for another store, …). ``session_factory.store`` is the default store.

This module imports nothing from Hypothesis, and the engine only when a fixture is used: a
project without Hypothesis loses nothing by having the plugin installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from engine.models import FauxModel, FauxStep
    from engine.runtime.session import Session
    from events.stores import EventStore, MemoryStore

__all__ = ["FauxModelFactory", "SessionFactory", "faux_model", "memory_store", "session_factory"]


class FauxModelFactory:
    """Makes :class:`~engine.models.FauxModel`\\ s and remembers them."""

    def __init__(self) -> None:
        #: every model this factory made, in order
        self.made: list[FauxModel] = []

    def __call__(self, script: Sequence[FauxStep]) -> FauxModel:
        from engine.models import FauxModel

        model = FauxModel(script)
        self.made.append(model)
        return model

    def assert_complete(self) -> None:
        """Fail if a model this factory made has script steps its session never asked for."""
        for model in self.made:
            model.assert_complete()


class SessionFactory:
    """Opens sessions with a deterministic clock and session ids (see the module docstring)."""

    def __init__(self, store: EventStore) -> None:
        from engine.testing.tools import counting_clock, sequential_ids

        #: the store sessions are opened on unless ``store=`` says otherwise
        self.store = store
        self._new_id = sequential_ids()
        self._clock = counting_clock()

    def __call__(
        self, *, model: Any = None, **options: Any
    ) -> AbstractAsyncContextManager[Session]:
        return self._open(model=model, **options)

    @asynccontextmanager
    async def _open(self, *, model: Any, **options: Any) -> AsyncIterator[Session]:
        from engine.models import FauxModel, faux_text
        from engine.runtime.session import Session

        store = options.pop("store", self.store)
        options.setdefault("clock", self._clock)
        options.setdefault("new_session_id", self._new_id)
        chosen = model if model is not None else FauxModel([faux_text("done")])
        async with Session.open(store, model=chosen, **options) as session:
            yield session


@pytest.fixture
def faux_model() -> FauxModelFactory:
    """A factory of :class:`~engine.models.FauxModel`\\ s: ``faux_model(script)``."""
    return FauxModelFactory()


@pytest.fixture
def memory_store() -> Iterator[MemoryStore]:
    """A fresh :class:`~events.MemoryStore`, closed after the test."""
    from events.stores import MemoryStore

    store = MemoryStore()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def session_factory(memory_store: MemoryStore) -> SessionFactory:
    """``session_factory(tools=..., model=..., **open_options)``: an ``async with`` block
    that opens a session on ``memory_store`` with a counting clock and ids ``session-N``."""
    return SessionFactory(memory_store)
