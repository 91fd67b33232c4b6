"""A fleet of session workers (tests.workers.fleet_worker) on one PostgreSQL database, driven
from outside as a web console and a supervisor would: sessions started, approvals answered,
workers killed and replaced. The fleet test (tests/hosts/test_fleet.py) and the fleet
benchmark (benchmarks/fleet.py) both use it.

Each tool body, as it starts, creates a file ``SESSION+CALL+TOOL+RANDOM`` in the runs folder:
the count of bodies that started, kept outside the engine and every worker.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]


def new_database(server_url: str) -> str:
    """A database of its own on the server (DBOS's tables and the store's), its URL."""
    import psycopg

    from events.stores.postgres import PostgresStore

    name = f"fleet_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = server_url.rsplit("/", 1)[0] + f"/{name}"

    async def init() -> None:
        with PostgresStore(url) as store:
            await store.init_schema()

    trio.run(init)
    return url


class Fleet:
    """``size`` workers on ``url``, forked by one parent process
    (tests.workers.fleet_worker); bodies mark their runs in ``runs``."""

    def __init__(self, url: str, runs: Path, size: int, claim_seconds: float = 2.0) -> None:
        self.url, self.runs = url, runs
        self.generation = 0
        self.said: set[str] = set()  # the lines the workers printed
        self.dead: list[str] = []
        self._local = threading.local()  # a connection per thread that counts steps
        self.parent = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.fleet_worker", url, str(runs),
             str(claim_seconds)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=(runs.parent / "workers.log").open("w"), text=True)
        threading.Thread(target=self._read, daemon=True).start()
        # the first launch creates DBOS's tables: the others start once it has
        self.slots = [self._start(0)]
        self.wait_for(lambda: self.ready(self.slots[0]), "the first worker to launch")
        self.slots += [self._start(slot) for slot in range(1, size)]
        for executor_id in self.slots:
            self.wait_for(lambda: self.ready(executor_id), f"worker {executor_id} to launch")

    def _read(self) -> None:
        assert self.parent.stdout is not None
        for line in self.parent.stdout:
            self.said.add(line.strip())

    def _tell(self, command: str) -> None:
        assert self.parent.stdin is not None
        self.parent.stdin.write(command + "\n")
        self.parent.stdin.flush()

    def _start(self, slot: int) -> str:
        self.generation += 1
        executor_id = f"w{slot}-{self.generation}"
        self._tell(f"start {executor_id}")
        return executor_id

    def ready(self, executor_id: str) -> bool:
        return f"ready {executor_id}" in self.said

    def wait_for(self, condition: Callable[[], bool], what: str,
                 patience: float = 240.0) -> None:
        """Wait until ``condition`` holds, looking every 10 ms; fail after ``patience``."""
        deadline = time.monotonic() + patience
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {patience} s for {what}")
            if self.parent.poll() is not None:
                raise AssertionError(f"the workers' parent exited with "
                                     f"{self.parent.returncode}")
            time.sleep(0.01)  # the condition is in files and tables nobody signals

    def kill_one(self, rng: random.Random, client: Any) -> str:
        """SIGKILL a launched worker, hand its sessions over, start its replacement."""
        from engine.hosts.dbos import take_over

        self.wait_for(lambda: any(map(self.ready, self.slots)), "a live worker")
        slot = rng.choice([i for i, w in enumerate(self.slots) if self.ready(w)])
        victim = self.slots[slot]
        self._tell(f"kill {victim}")
        self.wait_for(lambda: f"killed {victim}" in self.said, f"{victim} to die")
        self.dead.append(victim)
        take_over(client, [victim])
        self.slots[slot] = self._start(slot)
        return victim

    def stop(self) -> None:
        """Stop every worker and their parent."""
        assert self.parent.stdin is not None
        self.parent.stdin.close()
        try:
            self.parent.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.parent.kill()
            self.parent.wait()

    def marks(self) -> Counter[tuple[str, str, str]]:
        """How many times each (session, call, tool) body started."""
        found: Counter[tuple[str, str, str]] = Counter()
        for path in self.runs.iterdir():
            session_id, call_id, name, _ = path.name.split("+")
            found[session_id, call_id, name] += 1
        return found

    def bodies(self) -> int:
        """How many bodies started, in every process."""
        return sum(1 for _ in self.runs.iterdir())

    def steps(self) -> int:
        """How many session steps (a prompt, answers applied) DBOS has recorded as done: each
        once, however often a dead worker's step ran again."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            import psycopg

            conn = self._local.conn = psycopg.connect(self.url, autocommit=True)
        row = conn.execute(
            "SELECT count(*) FROM dbos.operation_outputs WHERE function_name IN "
            "('toolledger.prompt', 'toolledger.answer') AND completed_at_epoch_ms IS NOT NULL "
            "AND error IS NULL").fetchone()
        return int(row[0])
