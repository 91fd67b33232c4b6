"""Store URLs: which store each form names, and the errors for what names none."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path

import pytest

from events.stores import JsonlStore, MemoryStore, SqliteStore, open_store
from events.stores.urls import StoreURL, parse_store_url

from tests.stores.conformance.backends import recs


@pytest.mark.parametrize(("text", "kind", "target"), [
    ("runs.jsonl", "jsonl", "runs.jsonl"),
    ("/var/log/runs.jsonl", "jsonl", "/var/log/runs.jsonl"),
    ("odd:name.jsonl", "jsonl", "odd:name.jsonl"),  # a colon alone makes no URL
    ("jsonl://runs.jsonl", "jsonl", "runs.jsonl"),
    ("jsonl:///var/log/runs.jsonl", "jsonl", "/var/log/runs.jsonl"),
    ("sqlite:///runs.db", "sqlite", "runs.db"),
    ("sqlite:////var/db/runs.db", "sqlite", "/var/db/runs.db"),
    ("sqlite:///my%20runs.db", "sqlite", "my runs.db"),
    ("SQLite:///runs.db", "sqlite", "runs.db"),
    ("postgresql://me@db.example/runs?sslmode=require", "postgresql",
     "postgresql://me@db.example/runs?sslmode=require"),
    ("postgres://me@localhost/runs", "postgresql", "postgres://me@localhost/runs"),
    ("memory:", "memory", ""),
])
def test_what_each_form_names(text: str, kind: str, target: str) -> None:
    assert parse_store_url(text) == StoreURL(kind=kind, target=target)


@pytest.mark.parametrize(("text", "message"), [
    ("mysql://me@host/db", r"unknown store URL scheme mysql:// \(known: jsonl://, sqlite://"),
    ("sqlite://runs.db", "sqlite:/// then the path"),
    ("sqlite:///", "names no file"),
    ("jsonl://", "names no file"),
])
def test_what_names_no_store_says_so(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_store_url(text)


async def test_each_form_opens_its_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with closing(open_store("sqlite:///runs.db")) as store:
        assert isinstance(store, SqliteStore)
        await store.append("s", recs("s", 1, 2), expected_seq=0)
    with closing(open_store(f"sqlite:///{tmp_path}/runs.db", read_only=True)) as store:
        assert isinstance(store, SqliteStore) and store.read_only
        assert await store.read("s") == recs("s", 1, 2)
    with closing(open_store("runs.jsonl", key=b"k")) as store:
        assert isinstance(store, JsonlStore) and store.keyed
    with closing(open_store("jsonl://runs.jsonl", read_only=True)) as store:
        assert isinstance(store, JsonlStore) and store.read_only
    assert isinstance(open_store("memory:"), MemoryStore)
    with pytest.raises(ValueError, match="takes no key"):
        open_store("memory:", key=b"k")


@pytest.mark.parametrize("url", ["missing.jsonl", "sqlite:///missing.db"])
def test_read_only_never_creates(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError):
        open_store(url, read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_postgresql_without_its_store_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "events.stores.postgres", None)  # as if not installed
    with pytest.raises(ImportError, match=r"install the 'postgres' extra .*toolledger\[postgres\]"):
        open_store("postgresql://me@localhost/runs")
