"""The fleet test (docs/hosts.md, "Across machines"): worker processes advance sessions as
DBOS workflows on one PostgreSQL database, approvals come from outside at random moments
(some twice, some contradicted), and workers are killed with SIGKILL at random moments and
replaced. At the end every session has finished, every log verifies, every approval was
applied once, and every granted tool body ran exactly once (counted in files the bodies make,
outside the engine): a body a kill cut off is never run again (its tools are not idempotent),
so its call ends "interrupted", having run at most once.

``TOOLLEDGER_FLEET_SESSIONS`` and ``TOOLLEDGER_FLEET_KILLS`` change the size (100 sessions,
20 kills by default); ``TOOLLEDGER_FLEET_SEED`` replays a run's random choices.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("dbos")
pytest.importorskip("psycopg")

from dbos import DBOSClient  # noqa: E402

from engine import fold  # noqa: E402
from engine.hosts.dbos import PENDING, WORKFLOW, answer, cancel, start  # noqa: E402
from events.callevents import ApprovalResolved, ToolCallFailed  # noqa: E402
from events.stores.postgres import PostgresStore  # noqa: E402
from tests.fleet import Fleet, new_database  # noqa: E402
from tests.workers.fleet_worker import APPROVED_BY_PERSON, CALLS  # noqa: E402

SESSIONS = int(os.environ.get("TOOLLEDGER_FLEET_SESSIONS", "100"))
KILLS = int(os.environ.get("TOOLLEDGER_FLEET_KILLS", "20"))
WORKERS = 4

Send = tuple[str, str, bool, str | None]  # session, call, granted, idempotency key


def plan_answers(rng: random.Random, sessions: list[str]) -> list[Send]:
    """Each approval answered in a random order; one in ten sent twice under the same key (a
    retried request), one in ten contradicted later under another key (a second click)."""
    sends: list[Send] = []
    for session_id in sessions:
        for call_id in APPROVED_BY_PERSON:
            sends.append((session_id, call_id, rng.random() < 0.75, None))
    rng.shuffle(sends)
    for send in list(sends):
        where = sends.index(send)
        roll = rng.random()
        if roll < 0.1:
            sends.insert(rng.randint(where + 1, len(sends)), send)
        elif roll < 0.2:
            sends.insert(rng.randint(where + 1, len(sends)),
                         (send[0], send[1], not send[2], f"{send[0]}/{send[1]}/again"))
    return sends


def steps_owed(sends: list[Send]) -> int:
    """The steps every session must have done once ``sends`` are delivered, whatever the
    answers and the kills: its prompt, one step once ``charge`` is answered, and one more once
    ``ship`` is too (it is asked in the next turn)."""
    answered = {(session_id, call_id) for session_id, call_id, _, _ in sends}
    return SESSIONS + sum(2 if (session_id, "2.0") in answered else 1
                          for session_id, call_id in answered if call_id == "1.0")


def test_a_fleet_runs_every_body_once_through_worker_kills(postgres_server: Any,
                                                           tmp_path: Path) -> None:
    seed = int(os.environ.get("TOOLLEDGER_FLEET_SEED", random.randrange(2**32)))
    print(f"TOOLLEDGER_FLEET_SEED={seed}")
    rng = random.Random(seed)
    url = new_database(postgres_server.url)
    runs = tmp_path / "runs"
    runs.mkdir()
    began = time.monotonic()
    fleet = Fleet(url, runs, WORKERS)
    print(f"{WORKERS} workers up after {time.monotonic() - began:.1f} s")
    client = DBOSClient(system_database_url=url, system_database_pool_size=4)
    sessions = [f"f{n}" for n in range(SESSIONS)]
    sends = plan_answers(rng, sessions)
    failures: list[BaseException] = []

    def answer_at_random_moments() -> None:
        """Send the answers a few at a time, each batch once the fleet has moved on (or has
        done all it can without more answers)."""
        try:
            chunk = max(1, len(sends) // 25)
            for at in range(0, len(sends), chunk):
                before = fleet.steps()
                for session_id, call_id, granted, key in sends[at:at + chunk]:
                    answer(client, session_id, call_id, granted, key=key)
                owed = steps_owed(sends[:at + chunk])
                fleet.wait_for(lambda: fleet.steps() >= min(before + 1, owed),
                               "the fleet to take a step")
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)

    try:
        # one more session, cancelled while it waits for a person
        start(client, "cancelled", "charge, note, ship")
        waiting = client.get_event("cancelled", PENDING, 120) or []
        assert [pending["call_id"] for pending in waiting] == ["1.0"]
        cancel(client, "cancelled")
        for session_id in sessions:
            start(client, session_id, "charge, note, ship")
        sender = threading.Thread(target=answer_at_random_moments)
        sender.start()
        # kills at random moments, each once the fleet has done a random number of steps
        for threshold in sorted(rng.sample(range(SESSIONS // 10, 3 * SESSIONS), KILLS)):
            fleet.wait_for(lambda: fleet.steps() >= threshold or bool(failures),
                           f"{threshold} steps to be done")
            fleet.kill_one(rng, client)
            print(f"killed one at {threshold} steps, {time.monotonic() - began:.1f} s")
        sender.join()
        assert not failures, failures

        def finished() -> bool:
            failed = client.list_workflows(name=WORKFLOW, status=["ERROR", "CANCELLED"],
                                           workflow_ids=sessions, load_input=False)
            assert not failed, [(w.workflow_id, w.status, w.error) for w in failed]
            return len(client.list_workflows(name=WORKFLOW, status="SUCCESS",
                                             load_input=False, load_output=False)) == SESSIONS

        fleet.wait_for(finished, f"all {SESSIONS} sessions to finish")
        print(f"all finished after {time.monotonic() - began:.1f} s")
        outputs = {w.workflow_id: w.output for w in client.list_workflows(
            name=WORKFLOW, status="SUCCESS", load_input=False)}
        assert client.retrieve_workflow("cancelled").get_status().status == "CANCELLED"
    finally:
        fleet.stop()
        client.destroy()

    assert {session_id: (out["stop"], out["text"]) for session_id, out in outputs.items()} \
        == {session_id: ("end_turn", "done") for session_id in sessions}
    first = {(s, c): granted for s, c, granted, key in sends if key is None}
    contradicted = {(s, c) for s, c, _, key in sends if key is not None}

    async def read_all() -> tuple[Any, dict[str, list[Any]]]:
        with PostgresStore(url) as store:
            report = await store.verify()
            return report, {s: await store.read(s) for s in [*sessions, "cancelled"]}

    report, logs = trio.run(read_all)
    assert report.ok, report.broken
    assert {chain.session_id for chain in report.sessions} == {*sessions, "cancelled"}
    # the cancelled session stays paused in its log, its request pending, for a later resume
    assert fold(logs["cancelled"]).pending_approvals == ("1.0",)

    marks = fleet.marks()
    assert [key for key in marks if key[0] == "cancelled"] == [("cancelled", "1.1", "note")]
    statuses: Counter[str] = Counter()
    for session_id in sessions:
        resolved = [r.event for r in logs[session_id] if isinstance(r.event, ApprovalResolved)]
        # every approval applied once, as answered (either answer of a contradicted one)
        assert sorted(e.call_id for e in resolved) == list(APPROVED_BY_PERSON), session_id
        granted = {e.call_id: e.granted for e in resolved}
        for call_id in APPROVED_BY_PERSON:
            if (session_id, call_id) not in contradicted:
                assert granted[call_id] == first[session_id, call_id], (session_id, call_id)
        granted["1.1"] = True  # note needs no approval
        calls = fold(logs[session_id]).calls
        for call_id, name in CALLS.items():
            view, started = calls[call_id], marks[session_id, call_id, name]
            status = view.status
            if isinstance(view.terminal, ToolCallFailed):
                status = view.terminal.kind  # "interrupted": the process stopped in its body
            statuses[status] += 1
            # a granted body ran exactly once; a refused one never; one a kill cut off ran at
            # most once (it is not idempotent), ends "interrupted", and the model was told
            expected = {"completed": (1,), "interrupted": (0, 1), "denied": (0,)}
            assert status in (("completed", "interrupted") if granted[call_id] else
                              ("denied",)), (session_id, call_id, status)
            assert started in expected[status], (session_id, call_id, status, started)
    assert sum(marks.values()) == sum(1 for _ in runs.iterdir())
    assert set(marks) <= {(s, c, n) for s in [*sessions, "cancelled"] for c, n in CALLS.items()}
    print(f"{SESSIONS} sessions, {len(fleet.dead)} workers killed; calls: {dict(statuses)}")
