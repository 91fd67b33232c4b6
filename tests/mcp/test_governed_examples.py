"""examples/governed_pydantic_ai.py and examples/governed_openai_agents.py run as written:
each framework's agent calls the tools of examples/governed_notes.py's session, served by
``toolledger serve`` in a subprocess, and its answer says what came back of each call; the
session's log holds every call, each decided as the docs say."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.cli._common import read_sessions
from engine.core.reducers import fold
from examples import governed_openai_agents, governed_pydantic_ai


def calls(workdir: Path) -> dict[str, tuple[str, str]]:
    [records] = read_sessions(str(workdir / "notes.jsonl")).values()
    return {call_id: (view.name, view.status) for call_id, view in fold(records).calls.items()}


def test_the_pydantic_ai_example(tmp_path: Path) -> None:
    answer = asyncio.run(asyncio.wait_for(governed_pydantic_ai.main(str(tmp_path)), 120))
    assert answer == ("read_note: write the docs; "
                      "drop_notes: drop_notes was denied: denied by the rule 'drop_*'; "
                      "delete_note: deleted")
    assert calls(tmp_path) == {"h0": ("read_note", "completed"),
                               "h1": ("drop_notes", "denied"),
                               "h2": ("delete_note", "completed")}  # a person granted it
    assert not (tmp_path / "notes.sock").exists()


def test_the_openai_agents_example(tmp_path: Path) -> None:
    answer = asyncio.run(asyncio.wait_for(governed_openai_agents.main(str(tmp_path)), 120))
    assert answer == ("read_note: write the docs; "
                      "drop_notes: drop_notes was denied: denied by the rule 'drop_*'; "
                      "delete_note: delete_note was not approved: the todo list stays")
    assert calls(tmp_path) == {"h0": ("read_note", "completed"),
                               "h1": ("drop_notes", "denied"),
                               "h2": ("delete_note", "denied")}  # a person refused it
