"""Two would-be owners of one session, and ids that are almost right.

- **Claims are a lock.** Hypothesis plays a random sequence of claims and releases of a few
  sessions through several store objects (two :class:`JsonlStore`\\ s on one file stand for two
  processes; a :class:`MemoryStore` for one) and checks each answer against a model: a claim
  is refused with ``SessionInUse`` exactly when the session is held, by anyone, and a release
  frees it for everyone. Nothing is left in the log's folder once every claim has ended.
- **An id the store does not hold opens nothing.** Hypothesis draws the sessions a store holds
  and an id to open: one of them, or a near miss (another case, a space, a prefix, another
  character, any text at all). Without ``create=True``, ``Session.open`` refuses every id the
  store does not hold with ``SessionNotFound`` and writes nothing, and opens every id it holds.
"""

from __future__ import annotations

import os
import tempfile
import unittest.mock
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Session
from engine.models import FauxModel
from events import JsonlStore, MemoryStore, SessionInUse, SessionNotFound
from events.stores import locks
from events.stores.base import Claim
from events.types import Record, SessionStarted, UserMessage

SESSIONS = st.sampled_from(["a", "b", "c"])
#: (claim, store, session) or (release, index of a held claim, -)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), st.integers(0, 2), SESSIONS),
        st.tuples(st.just("release"), st.integers(0, 5), st.just("")),
    ),
    max_size=25,
)


def check_claims(stores: list[Any], steps: list[tuple[str, int, str]]) -> None:
    held: dict[str, Claim] = {}
    for op, number, session in steps:
        if op == "claim":
            store = stores[number % len(stores)]
            try:
                claim = store.claim(session)
            except SessionInUse as exc:
                assert session in held, f"{session!r} was free, yet: {exc}"
                assert f"{session!r} is in use" in str(exc)
            else:
                assert session not in held, f"{session!r} was claimed twice at once"
                held[session] = claim
        elif held:
            session = sorted(held)[number % len(held)]
            held.pop(session).release()
    for claim in held.values():
        claim.release()


@pytest.mark.parametrize("byte_claims", [True, False] if locks.BYTE_CLAIMS else [False])
@settings(max_examples=40)
@given(steps=STEPS)
def test_claims_through_two_jsonl_stores_behave_as_one_lock(
    steps: list[Any], byte_claims: bool
) -> None:
    """By a byte of the log (OFD locks), and by lock files (forced where OFD locks exist)."""
    with tempfile.TemporaryDirectory() as folder, \
            unittest.mock.patch.object(locks, "BYTE_CLAIMS", byte_claims):
        path = Path(folder) / "log.jsonl"
        with JsonlStore(path) as first, JsonlStore(path) as second:
            check_claims([first, second, first], steps)
        assert os.listdir(folder) == ["log.jsonl"]


@settings(max_examples=40)
@given(STEPS)
def test_claims_through_a_memory_store_behave_as_one_lock(steps: list[Any]) -> None:
    check_claims([MemoryStore()], steps)


def near_misses(held: list[str]) -> st.SearchStrategy[str]:
    one = st.sampled_from(held)
    return st.one_of(
        one,
        one.map(str.upper),
        one.map(lambda s: s + " "),
        one.map(lambda s: " " + s),
        one.map(lambda s: s[:-1]),
        st.tuples(one, st.characters(codec="utf-8")).map(lambda p: p[0] + p[1]),
        st.text(max_size=8),
    )


@settings(max_examples=40)
@given(st.data())
def test_an_id_the_store_does_not_hold_is_refused_and_nothing_is_written(
    data: st.DataObject,
) -> None:
    held = data.draw(st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=6),
                              min_size=1, max_size=3, unique=True), label="held")
    wanted = data.draw(near_misses(held), label="opened")

    async def main() -> None:
        store = MemoryStore()
        for session in held:
            await store.append(session, [Record(session_id=session, seq=1, time=1.0,
                                                event=SessionStarted(metadata={}))], 0)
        before = {s: await store.read(s) for s in held}
        model = FauxModel([])
        if wanted in held:
            async with Session.open(store, model=model, session_id=wanted) as session:
                assert session.session_id == wanted
        else:
            try:
                async with Session.open(store, model=model, session_id=wanted):
                    raise AssertionError(f"{wanted!r} is not held, yet it opened")
            except SessionNotFound as exc:
                assert exc.session_id == wanted
            assert await store.sessions() == held
            assert {s: await store.read(s) for s in held} == before
        assert model.requests == []

    trio.run(main)


OPERATIONS = st.lists(st.tuples(st.sampled_from(["append", "read", "last_seq", "sessions"]),
                                st.booleans()), min_size=1, max_size=8)


@settings(max_examples=15)
@given(OPERATIONS, st.booleans())
def test_store_calls_under_a_lock_held_elsewhere_never_stop_the_loop(
    operations: list[tuple[str, bool]], durable: bool
) -> None:
    """Each operation runs with the file's lock held elsewhere (or not); while it waits, another
    task of the loop runs and lets the lock go. The answers are those of an unhindered store."""
    from tests.stores.lockholder import HeldElsewhere, other_task

    async def main(path: Path) -> None:
        seq = 0
        others = 0
        with JsonlStore(path, durable=durable) as store:
            for name, held_elsewhere in operations:
                # another process appends first: a read has a tail to index, under the lock
                others += 1
                with JsonlStore(path) as elsewhere:
                    await elsewhere.append("x", [Record(
                        session_id="x", seq=others, time=1.0,
                        event=SessionStarted(metadata={}) if others == 1 else UserMessage(text="x"),
                    )], others - 1)
                order: list[str] = []

                async def operate() -> None:
                    nonlocal seq
                    if name == "append":
                        seq += 1
                        await store.append("s", [Record(session_id="s", seq=seq, time=1.0,
                                                        event=SessionStarted(metadata={}))
                                                 if seq == 1 else Record(
                                                     session_id="s", seq=seq, time=1.0,
                                                     event=UserMessage(text=str(seq)))],
                                           seq - 1)
                    else:
                        await getattr(store, name)(*(("s",) if name != "sessions" else ()))
                    order.append(name)

                if held_elsewhere:
                    held = HeldElsewhere(path)
                    try:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(operate)
                            nursery.start_soon(other_task, order, held)
                    finally:
                        held.join()
                    # the operation needed the lock, and waited for it while the loop ran on
                    assert order == ["another task ran", name]
                else:
                    await operate()
            assert [r.seq for r in await store.read("s")] == list(range(1, seq + 1))
            assert await store.last_seq("s") == seq

    with tempfile.TemporaryDirectory() as folder:
        trio.run(main, Path(folder) / "log.jsonl")
