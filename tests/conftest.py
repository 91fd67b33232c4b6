"""Shared helpers for runtime tests: run a whole session on a MemoryStore, deterministically.

``run_session(tools, script, **session_kwargs)`` opens a :class:`~engine.Session` with a
counting clock and a fixed session id, registers the given handlers, sends one prompt and
returns ``(state, records, model)``: the session's projection, every record the store holds
(read back after the session closed) and the faux model. It checks on the way out that a fold
of the stored log equals the live state, so every test that uses it also checks that.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, settings

from engine import Session, ToolSpec, fold
from engine.core.handlers import ToolCallHandler, ToolResultHandler
from engine.core.reducers import Projection
from engine.models import FauxModel, FauxStep
from events import EventStore, MemoryStore, Record
from tests.pgserver import URL_VARIABLE as POSTGRES_URL_VARIABLE

# -- Hypothesis profiles ---------------------------------------------------------------------
# ``ci`` (the default) keeps the whole suite under a few minutes on a small machine; ``nightly``
# runs many more examples. Choose with TOOLLEDGER_HYPOTHESIS_PROFILE=ci|nightly (docs/testing.md).
# A test whose @settings names max_examples itself keeps its own count under either profile.

HYPOTHESIS_PROFILE_VARIABLE = "TOOLLEDGER_HYPOTHESIS_PROFILE"
HYPOTHESIS_PROFILES = ("ci", "nightly")
settings.register_profile(
    "ci", max_examples=50, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly", max_examples=1_000, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
HYPOTHESIS_PROFILE = os.environ.get(HYPOTHESIS_PROFILE_VARIABLE, "").strip() or "ci"
if HYPOTHESIS_PROFILE not in HYPOTHESIS_PROFILES:
    raise pytest.UsageError(
        f"{HYPOTHESIS_PROFILE_VARIABLE}={HYPOTHESIS_PROFILE!r} is not a Hypothesis profile of "
        f"this suite: use one of {', '.join(HYPOTHESIS_PROFILES)}"
    )
settings.load_profile(HYPOTHESIS_PROFILE)

# -- Ctrl-C for child processes ----------------------------------------------------------------
# Some tests interrupt a child process (toolledger tail -f, serve --http) with SIGINT, as Ctrl-C
# would, and check it ends quietly. A child inherits an ignored SIGINT, and Python then installs
# no KeyboardInterrupt handler: a shell starts its background jobs that way, and the child would
# never end. So the suite does not ignore SIGINT itself; a child's exec resets a handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SESSION_ID = "test-session"

E = TypeVar("E")


def counting_clock(start: float = 1_000.0) -> Callable[[], float]:
    """A clock that ticks one second per reading: deterministic record times."""
    now = [start]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    return clock


async def run_session(
    tools: Iterable[ToolSpec],
    script: Sequence[FauxStep],
    *,
    prompt: str = "go",
    on_tool_call: Iterable[ToolCallHandler] = (),
    on_tool_result: Iterable[ToolResultHandler] = (),
    store: EventStore | None = None,
    **session_kwargs: Any,
) -> tuple[Projection, list[Record], FauxModel]:
    """One prompt through a fresh session; ``session_kwargs`` go to :meth:`Session.open`."""
    store = store if store is not None else MemoryStore()
    model = FauxModel(script)
    session_kwargs.setdefault("session_id", SESSION_ID)
    session_kwargs.setdefault("create", True)
    session_kwargs.setdefault("clock", counting_clock())
    async with Session.open(store, model=model, tools=tools, **session_kwargs) as session:
        for handler in on_tool_call:
            session.on_tool_call(handler)
        for result_handler in on_tool_result:
            session.on_tool_result(result_handler)
        await session.prompt(prompt)
        state = session.state
    records = await store.read(session_kwargs["session_id"])
    assert fold(records).snapshot() == state.snapshot(), "the stored log folds to another state"
    return state, records, model


def events_of(records: Iterable[Record], kind: type[E], call_id: str | None = None) -> list[E]:
    """The events of type ``kind`` in ``records`` (only those of ``call_id`` if given)."""
    return [
        r.event
        for r in records
        if isinstance(r.event, kind)
        and (call_id is None or getattr(r.event, "call_id", None) == call_id)
    ]


def call_events(records: Iterable[Record], call_id: str) -> list[Any]:
    """Every event about ``call_id``, in log order."""
    return [r.event for r in records if getattr(r.event, "call_id", None) == call_id]


def by_call(records: Sequence[Record]) -> dict[str, list[Any]]:
    """Each call's events in order (tracebacks aside: they name the code that ran)."""
    calls: dict[str, list[Any]] = {}
    for record in records:
        event = record.event
        call_id = getattr(event, "call_id", None)
        if call_id is not None:
            error = getattr(event, "error", None)
            if error is not None:
                event = attrs.evolve(event, error=attrs.evolve(error, traceback=""))
            calls.setdefault(call_id, []).append(event)
    return calls


@pytest.fixture
def without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the 2020-12 validator (the ``jsonschema`` package) were not installed: a schema
    that needs it is refused at registration (engine.core.schemas.draft2020)."""
    from engine.core.schemas import draft2020

    monkeypatch.setattr(draft2020, "_modules", lambda: None)
# -- a PostgreSQL server, for the tests of the PostgreSQL store --------------------------------
# Started once per test run from the machine's binaries (tests/pgserver.py), stopped and removed
# at the end whatever the outcome. Without one, its tests skip and say why; with
# TOOLLEDGER_REQUIRE_POSTGRES=1 (as .ci/run sets) they fail instead (docs/contributing.md).

REQUIRE_POSTGRES_VARIABLE = "TOOLLEDGER_REQUIRE_POSTGRES"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """The run's PostgreSQL server (a :class:`tests.pgserver.Server`)."""
    from tests import pgserver

    def unavailable(reason: str) -> None:
        if os.environ.get(REQUIRE_POSTGRES_VARIABLE) == "1":
            pytest.fail(f"{REQUIRE_POSTGRES_VARIABLE}=1 but {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL tests skipped: {reason}")

    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install 'toolledger[postgres]')")
    try:
        server = pgserver.start()
    except pgserver.ServerUnavailable as exc:
        unavailable(f"no PostgreSQL server could be started: {exc}")
        raise
    os.environ[POSTGRES_URL_VARIABLE] = server.url
    try:
        yield server
    finally:
        os.environ.pop(POSTGRES_URL_VARIABLE, None)
        server.stop()


@pytest.fixture(autouse=True)
def _postgres_server_for_the_postgres_backend(request: pytest.FixtureRequest) -> None:
    """A test parametrized with ``"postgres"`` (the conformance suite's backend) gets the
    server: without one it skips or fails, saying why, like any test that asks for it."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "postgres" in callspec.params.values():
        request.getfixturevalue("postgres_server")
