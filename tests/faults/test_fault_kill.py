"""A writer killed with SIGKILL at random points loses no acknowledged record and leaves a log
that opens, verifies, folds and resumes.

Each run is one process (forked by the zygote in ``tests/workers/kill_worker.py``) writing a
busy session to its own JSONL log and printing ``ACK seq`` after each batch the store
acknowledged. The test reads a random number of those lines from the pipe and kills the writer
at once, wherever it is: in the middle of a write, between a tool's ``started`` and its result,
while an approval is asked, while the model is asked. No sleeping: the kill point is chosen by
how many acknowledgements were read. A kill rarely lands inside a ``write``, so one run in five
has the writer stop half-way through a batch's bytes and wait there for the kill: a torn last
line for certain, possibly after whole lines of the same unacknowledged batch. Then:

- every acknowledged seq (those read before the kill and any still in the pipe) is in the log;
- ``verify`` on the file as the kill left it finds at most a torn last line;
- a store opens it (cutting the torn line off, nothing else), ``verify`` passes, it folds;
- ``Session.open(...).resume()`` with the same tools closes every call the kill left open,
  and the log ends consistent (no open call, fold == live, one terminal event per call).

The number of runs follows the Hypothesis profile (50 under ``ci``, 500 under ``nightly``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import trio

from engine import Session
from engine.core.reducers import fold
from engine.models import FauxModel, faux_text
from events import JsonlStore, verify_jsonl
from tests.faults.checks import KILL_RUNS, assert_chain_verifies, assert_consistent
from tests.workers import kill_worker

ROOT = Path(__file__).resolve().parents[2]
MAX_ACKS_BEFORE_KILL = 60
#: One run in TEAR_EVERY stops its writer half-way through a write before killing it.
TEAR_EVERY = 5


class Zygote:
    """The forking worker, and the protocol to run and kill one writer."""

    def __init__(self, stderr: IO[str]) -> None:
        self._stderr = stderr
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.kill_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True, cwd=ROOT, env=env,
        )

    def errors(self) -> str:
        self._stderr.flush()
        return Path(self._stderr.name).read_text()

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the zygote stopped; its stderr:\n{self.errors()}"
        return line.strip()

    def run_and_kill(self, log: Path, seed: int, after: int, tear: bool) -> tuple[list[int], str]:
        """Start a writer on ``log`` and kill it once it acknowledged ``after`` batches (with
        ``tear``: once it wrote half of the next one); return every seq it acknowledged and
        how it ended (``"signal 9"`` when the kill did it)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {log} {seed} {after + 1 if tear else 0}\n")
        self.proc.stdin.flush()
        first = self._line()
        assert first.startswith("PID "), first
        pid = int(first.split()[1])
        acked: list[int] = []
        killed = False
        while True:
            line = self._line()
            if line.startswith("EXIT "):
                break
            if line == "TORN":
                assert tear and len(acked) == after, (line, acked)
            else:
                acked.append(int(line.removeprefix("ACK ")))
            if not killed and (line == "TORN" or (not tear and len(acked) >= after)):
                os.kill(pid, signal.SIGKILL)
                killed = True
            # after the kill, acknowledgements still in the pipe count too
        assert line.startswith(f"EXIT {pid} "), line
        return acked, line.removeprefix(f"EXIT {pid} ")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    stderr_path = tmp_path_factory.mktemp("zygote") / "stderr.txt"
    with stderr_path.open("w") as stderr:
        worker = Zygote(stderr)
        try:
            yield worker
        finally:
            worker.close()


async def resume(log: Path) -> None:
    """Reopen the killed session with the writer's tools and finish it; check the log."""
    model = FauxModel([faux_text("done")])
    with JsonlStore(log) as store:
        async with Session.open(store, model=model, tools=kill_worker.tools(),
                                approver=kill_worker.approver,
                                session_id=kill_worker.SESSION, create=True) as session:
            session.on_tool_call(kill_worker.guard)
            result = await session.resume()
            for _ in range(10):  # approvals asked before the kill wait for the host
                if result.stop != "paused":
                    break
                assert result.pending, "paused with nothing pending"
                for request in result.pending:
                    await session.resolve_approval(request.call_id, True)
                result = await session.resume()
            assert result.stop == "end_turn", result
            assert session.state.open_calls == ()
            live = session.state
        assert len(model.requests) <= 1
        await assert_consistent(store, kill_worker.SESSION, live)
    assert_chain_verifies(log)


@pytest.mark.parametrize("run", range(KILL_RUNS))
def test_a_writer_killed_at_a_random_point_loses_no_acknowledged_record(
    zygote: Zygote, tmp_path: Path, run: int
) -> None:
    log = tmp_path / "log.jsonl"
    after = random.Random(run).randint(1, MAX_ACKS_BEFORE_KILL)
    tear = run % TEAR_EVERY == TEAR_EVERY - 1
    acked, how = zygote.run_and_kill(log, seed=run, after=after, tear=tear)
    assert how == f"signal {int(signal.SIGKILL)}", (
        f"the writer ended by itself ({how}); its stderr:\n{zygote.errors()}")
    assert len(acked) >= after and acked == sorted(set(acked))

    as_killed = log.read_bytes()
    complete = as_killed.count(b"\n")
    report = verify_jsonl(log)
    if not report.ok:  # only a torn last line may break the chain (what verify calls it is
        assert report.broken is not None  # checked in test_fault_garbage.py)
        assert report.broken.line == complete + 1, report.broken
        assert not as_killed.endswith(b"\n")

    with JsonlStore(log) as store:
        kept = log.read_bytes()
        assert kept + store.dropped_tail == as_killed
        assert kept == as_killed[: len(kept)] and kept.endswith(b"\n")
        assert b"\n" not in store.dropped_tail
        records = trio.run(store.read, kill_worker.SESSION)
        if tear:  # half a batch: a torn line, and maybe whole lines of it before that
            assert store.dropped_tail or len(records) > acked[-1]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert acked[-1] <= len(records), (
        f"seq {acked[-1]} was acknowledged, the log ends at {len(records)}")
    fold(records)  # every record the kill left is one the lifecycle accepts
    assert_chain_verifies(log)

    trio.run(resume, log)
