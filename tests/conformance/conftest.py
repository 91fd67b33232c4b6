"""The conformance suite's PostgreSQL backend needs the run's server: every test that runs on
it (a ``store`` or ``kind`` parameter of ``"postgres"``) asks for the ``postgres_server``
fixture, which skips or fails the test, saying why, when there is none
(tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _postgres_server_for_the_postgres_backend(request: pytest.FixtureRequest) -> None:
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "postgres" in callspec.params.values():
        request.getfixturevalue("postgres_server")
