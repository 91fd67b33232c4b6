"""Artifacts, in every store: the whole of a result too large for the log, written, read back,
verified with the chain of the record that names it, copied with its session, and a missing
or changed one named by ``verify``."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import pytest

from events.artifacts import artifact_name, decode_artifact, encode_artifact
from events.errors import ArtifactError
from events.results import KeptResult, ToolResult, text
from events.stores import EventStore
from events.stores.base import ArtifactStore, keeps_artifacts
from events.stores.copying import CopyError, copy_session
from events.types import Record, ToolCallCompleted

from tests.stores.conformance.backends import (LOGS, SHARED, T0, make_store,
                                               postgres_url, rec, store)

WHOLE = ToolResult(content=[text("line\n" * 50_000 + "é🙂 the end")])
DATA, SHA = encode_artifact(WHOLE)


def completed(session: str, seq: int, call_id: str = "1.0") -> Record:
    event = ToolCallCompleted(call_id=call_id, result=ToolResult(content=[text("[cut]")]),
                              kept=KeptResult(size=len(DATA), sha256=SHA))
    return Record(session_id=session, seq=seq, time=T0 + seq, event=event)


def artifacts(store: EventStore) -> ArtifactStore:
    assert keeps_artifacts(store)
    return cast(ArtifactStore, store)


def tamper(kind: str, directory: Path, session: str, call_id: str, data: bytes | None) -> None:
    """Change (or, with ``None``, remove) an artifact where its store keeps it: what someone
    with write access to the folder or the database can do."""
    if kind == "jsonl":
        path = directory / f"{LOGS['jsonl']}.artifacts" / artifact_name(session, call_id, SHA)
        if data is None:
            os.unlink(path)
        else:
            path.write_bytes(data)
        return
    if kind == "sqlite":
        with closing(sqlite3.connect(directory / LOGS["sqlite"], isolation_level=None)) as db:
            if data is None:
                db.execute("DELETE FROM artifacts")
            else:
                db.execute("UPDATE artifacts SET data = ?", (data,))
        return
    import psycopg

    with psycopg.connect(postgres_url(directory), autocommit=True) as conn:
        if data is None:
            conn.execute("DELETE FROM toolledger_artifacts")
        else:
            conn.execute("UPDATE toolledger_artifacts SET data = %s", (data,))


async def test_an_artifact_is_kept_and_read_back_as_it_was_given(store: EventStore) -> None:
    kept = artifacts(store)
    assert await kept.get_artifact("s", "1.0", SHA) is None
    await kept.put_artifact("s", "1.0", SHA, DATA)
    await kept.put_artifact("s", "1.0", SHA, DATA)  # again: a no-op
    data = await kept.get_artifact("s", "1.0", SHA)
    assert data == DATA and decode_artifact(data, "s", "1.0", SHA) == WHOLE
    assert await kept.get_artifact("s", "1.1", SHA) is None  # named by its call too
    assert await kept.get_artifact("other", "1.0", SHA) is None  # and by its session


async def test_an_artifact_whose_bytes_are_not_its_hash_is_refused(store: EventStore) -> None:
    with pytest.raises(ValueError, match="SHA-256"):
        await artifacts(store).put_artifact("s", "1.0", SHA, DATA + b" ")
    assert await artifacts(store).get_artifact("s", "1.0", SHA) is None


@pytest.mark.parametrize("kind", SHARED)
async def test_verify_covers_the_artifacts_records_name(kind: str, tmp_path: Path) -> None:
    with closing(make_store(kind, tmp_path)) as log:
        await artifacts(log).put_artifact("s", "1.0", SHA, DATA)
        await log.append("s", [rec("s", 1), completed("s", 2), rec("s", 3)], 0)
        verify: Any = getattr(log, "verify")
        assert (await verify()).ok

        tamper(kind, tmp_path, "s", "1.0", DATA[:-10])  # cut short
        report = await verify()
        assert report.broken is not None and report.broken.seq == 2
        assert "artifact of call 1.0" in report.broken.problem and SHA in report.broken.problem
        assert "changed or cut short" in report.broken.problem
        with pytest.raises(ArtifactError, match="1.0"):
            decode_artifact(await artifacts(log).get_artifact("s", "1.0", SHA), "s", "1.0", SHA)

        tamper(kind, tmp_path, "s", "1.0", None)
        report = await verify()
        assert report.broken is not None and "is missing" in report.broken.problem


@pytest.mark.parametrize("kind", SHARED)
@pytest.mark.parametrize("into", SHARED)
async def test_a_copy_carries_its_sessions_artifacts(kind: str, into: str, tmp_path: Path) -> None:
    source_dir, target_dir = tmp_path / "a", tmp_path / "b"
    source_dir.mkdir()
    target_dir.mkdir()
    with closing(make_store(kind, source_dir)) as source, \
            closing(make_store(into, target_dir)) as target:
        await artifacts(source).put_artifact("s", "1.0", SHA, DATA)
        await source.append("s", [rec("s", 1), completed("s", 2)], 0)
        await copy_session(source, target, "s")
        assert await artifacts(target).get_artifact("s", "1.0", SHA) == DATA
        assert (await getattr(target, "verify")()).ok


async def test_a_copy_refuses_a_session_whose_artifact_is_gone(tmp_path: Path) -> None:
    source_dir, target_dir = tmp_path / "a", tmp_path / "b"
    source_dir.mkdir()
    target_dir.mkdir()
    with closing(make_store("jsonl", source_dir)) as source, \
            closing(make_store("sqlite", target_dir)) as target:
        await artifacts(source).put_artifact("s", "1.0", SHA, DATA)
        await source.append("s", [rec("s", 1), completed("s", 2)], 0)
        tamper("jsonl", source_dir, "s", "1.0", None)
        with pytest.raises(CopyError, match="artifact"):
            await copy_session(source, target, "s")
        assert await target.last_seq("s") == 0  # nothing was copied
