"""The benchmarks run, and their table has every benchmark (no timing is asserted here).

``python -m benchmarks --quick --json`` runs once, in a subprocess, as documented in
docs/performance.md; its JSON is then checked for every group and every figure, each with its
samples and, where the issue sets one, a baseline and a target; and the saved run is rendered
as the rich table and as Markdown, which must name every figure too.

``python -m benchmarks.peers --quick`` runs for toolledger alone and beside each peer that is
installed (a peer that is not is skipped, with the reason); its saved run renders.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import GROUPS
from benchmarks.__main__ import main
from benchmarks.harness import fmt

ROOT = Path(__file__).resolve().parents[2]

# group -> the figures it must have (a name, or the start of one whose end depends on sizes)
EXPECTED: dict[str, list[str]] = {
    "dispatch": [
        "engine call, JsonlStore",
        "engine call, MemoryStore()",
        "engine call, MemoryStore(check_encodable=False)",
        "engine call, JsonlStore, 3 tool_call handlers",
        "engine call, JsonlStore, 3 tool_call + 3 tool_result handlers",
        "engine call, JsonlStore, a typed tool",
        "fastjsonschema validate, then await",
        "a call's four events recorded, nothing else, JsonlStore",
        "a call's four events recorded, nothing else, MemoryStore()",
        "a call's four events recorded, nothing else, MemoryStore(check_encodable=False)",
        "a call's four records encoded, proven, sealed and written, nothing else",
        "a call's four records encoded and proven, nothing else",
    ],
    "agent loop": [
        "agent loop, 20 calls",
        "agent loop, 20 calls, MemoryStore()",
        "agent loop, 20 calls, MemoryStore(check_encodable=False)",
        "agent loop, 200 calls",
        "agent loop, 2,000 calls",
        "agent loop, last 200 of 2,000 calls",
        "agent loop, 2,000 calls: cyclic GC passes",
        "agent loop, 20 calls, cyclic GC off",
        "agent loop, 2,000 calls, cyclic GC off",
    ],
    "fold": ["open JsonlStore, read, fold ", "fold ",
             "fold, events decoded by the converter alone",
             "fold, lines parsed by json's scanner alone"],
    "stores": [
        "JsonlStore(durable=False)",
        "MemoryStore() (checks encoding)",
        "MemoryStore(check_encodable=False)",
        "JsonlStore(durable=True)",
        "SqliteStore(durable=False)",
        "SqliteStore(durable=False), batches of 4",
        "SqliteStore(durable=True), batches of 4",
        "SqliteStore(durable=True), 8 sessions (group commit)",
        "SqliteStore(durable=True), 1 session (group commit)",
        "a record encoded, proven, sealed and written with an append's system calls, "
        "nothing else",
        "a record encoded and proven to read back, nothing stored",
        "flock, size, write, unlock of a sealed line, nothing else",
    ],
    "memory": ["live session, JsonlStore, ", "live session, MemoryStore(), ",
               "projection folded from the log"],
    "concurrency": ["50 sessions × 10 calls, one trio loop, JsonlStore",
                    "open and close a session, JsonlStore",
                    "claim and release a session, JsonlStore",
                    "50 sessions × 10 calls, one trio loop, MemoryStore()",
                    "open and close a session, MemoryStore()",
                    "open and close a session, MemoryStore(check_encodable=False)"],
}
# figures the issue sets a target for, and the baseline each is measured against
TARGETS = {
    "engine call, JsonlStore": "bare await tool(**args)",
    "engine call, MemoryStore()": "bare await tool(**args)",
    "agent loop, 20 calls, MemoryStore(check_encodable=False)": "agent loop, 20 calls",
    "agent loop, 2,000 calls": "agent loop, 20 calls",
    "open JsonlStore, read, fold ": "json.loads over the same lines",
    "JsonlStore(durable=False)": "os.write of the same lines",
    "SqliteStore(durable=False), batches of 4": "JsonlStore(durable=False), batches of 4",
    "live session, JsonlStore, ": "the JSONL log's bytes",
    "open and close a session, JsonlStore": None,
}
# the floor under each target (what the figure must include), by the figure
FLOORS = {
    "engine call, JsonlStore":
        "a call's four records encoded, proven, sealed and written, nothing else",
    "engine call, MemoryStore()": "a call's four records encoded and proven, nothing else",
}
# the groups whose first figure is the README's store, a JsonlStore (the agent loop's rows
# are all on it but for the one that names the memory store)
HEADLINE_FIRST = ("dispatch", "fold", "stores", "memory", "concurrency")


def _named(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [row for row in rows if row["figure"]["name"] == name
             or (name.endswith(" ") and row["figure"]["name"].startswith(name))]
    assert len(found) == 1, f"{name!r}: {len(found)} rows in {[r['figure']['name'] for r in rows]}"
    return found[0]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """One quick run of the documented command, its JSON parsed and saved."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    saved = tmp_path_factory.mktemp("benchmarks") / "quick.json"
    saved.write_text(done.stdout, encoding="utf-8")
    return json.loads(done.stdout), saved


def test_the_quick_run_has_every_benchmark(quick_run: tuple[dict[str, Any], Path]) -> None:
    result, _ = quick_run
    rows = result["rows"]
    assert result["settings"]["quick"] is True
    assert {"cpus", "cpu", "python"} <= set(result["machine"])
    assert [row["group"] for row in rows] == sorted(
        (row["group"] for row in rows), key=list(GROUPS).index)
    assert set(EXPECTED) == set(GROUPS) == {row["group"] for row in rows}
    for group, names in EXPECTED.items():
        in_group = [row for row in rows if row["group"] == group]
        for name in names:
            _named(in_group, name)
        assert len(in_group) == len(names), [row["figure"]["name"] for row in in_group]
        if group in HEADLINE_FIRST:
            assert "JsonlStore" in in_group[0]["figure"]["name"], group


def test_every_figure_has_samples_and_a_baseline_where_the_issue_asks(
    quick_run: tuple[dict[str, Any], Path],
) -> None:
    rows = quick_run[0]["rows"]
    for row in rows:
        figure = row["figure"]
        assert figure["samples"], figure["name"]
        assert all(isinstance(value, (int, float)) and value > 0 for value in figure["samples"])
        assert figure["min"] <= figure["median"] <= figure["max"]
        if row["baseline"] is not None:
            assert row["baseline"]["samples"] and row["comparison"], figure["name"]
    for name, baseline in TARGETS.items():
        row = _named(rows, name)
        assert row["target"] and isinstance(row["met"], bool), name
        if baseline is not None:
            assert row["baseline"]["name"] == baseline, name
    for row in rows:
        if row["group"] == "dispatch" and row["figure"]["name"] not in FLOORS.values():
            assert row["baseline"]["name"] == "bare await tool(**args)"


def test_a_target_not_met_names_the_floor_that_stops_it(
    quick_run: tuple[dict[str, Any], Path],
) -> None:
    """A floor is a row of the same run, whose figure alone misses the target."""
    rows = quick_run[0]["rows"]
    for row in rows:
        if not row["floor"]:
            continue
        assert row["met"] is False, row["figure"]["name"]
        value, name = row["floor"].split(": ", 1)
        floor = _named([r for r in rows if r["group"] == row["group"]], name)
        figure = floor["figure"]
        assert value == f"{fmt(figure['median'], figure['unit'])} {figure['unit']}"
    stopped = {row["figure"]["name"]: row for row in rows if row["floor"]}
    limits = {"engine call, JsonlStore": 20.0, "engine call, MemoryStore()": 11.0}
    for name, limit in limits.items():
        floor = _named(rows, FLOORS[name])["figure"]["median"]
        # a target is said to be stopped by its floor exactly when the floor misses it
        assert (name in stopped) == (floor > limit and _named(rows, name)["met"] is False)


def test_a_saved_run_renders_as_a_table_and_as_markdown(
    quick_run: tuple[dict[str, Any], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result, saved = quick_run
    names = [row["figure"]["name"] for row in result["rows"]]
    assert main(["--render", str(saved), "--markdown"]) == 0
    table = capsys.readouterr().out
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(lines) == 1 + len(names)  # the header, then one line per figure
    for name, line in zip(names, lines[1:]):
        assert f"| {name} |" in line
    assert main(["--render", str(saved)]) == 0
    terminal = capsys.readouterr().out
    assert "toolledger benchmarks (quick)" in terminal
    for group in GROUPS:
        assert group in terminal


def test_the_saved_runs_render(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/performance.md's tables are these runs, rendered
    runs = sorted((ROOT / "benchmarks" / "runs").glob("*.json"))
    assert runs
    for run in runs:
        assert main(["--render", str(run), "--markdown"]) == 0
        table = capsys.readouterr().out
        assert table.startswith("toolledger benchmarks: ")
        assert all(f"| {group} |" in table for group in GROUPS)


def test_compare_runs_both_checkouts_and_prints_their_ratio() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", str(ROOT), "--rounds", "1", "--reps", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    rows = done.stdout.splitlines()[1:]
    assert [row.split("  ")[0] for row in rows] == ["µs per nested call", "µs per agent-loop turn"]
    for row in rows:
        other, this, ratio = row.split()[-4:-1]
        assert float(other) > 0 and float(this) > 0 and ratio.endswith("×")


@pytest.mark.parametrize("command", ["benchmarks.compare", "benchmarks.instructions"])
def test_the_comparisons_refuse_a_directory_that_is_not_a_checkout(
    command: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", command, str(tmp_path)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert "is not the root of a toolledger checkout" in done.stderr


@pytest.mark.slow  # about two minutes: run with -m slow (benchmarks/README.md)
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_counts_a_call_and_a_turn_under_valgrind() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "--sizes", "10", "30"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    row = done.stdout.splitlines()[1].split()
    dispatch, loop = (int(value.replace(",", "")) for value in row[-2:])
    # a nested call does a lot more than nothing, and a turn more than a nested call
    assert 10_000 < dispatch < loop, row


def test_the_valgrind_test_runs_only_when_asked() -> None:
    def collected(*options: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             *options, "tests/project/test_benchmarks.py"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
            text=True)
        return [line for line in done.stdout.splitlines() if "::" in line]

    by_default, asked = collected(), collected("-m", "slow")
    assert not [test for test in by_default if "under_valgrind" in test], by_default
    assert [test.split("::")[1] for test in asked] == [
        "test_instructions_counts_a_call_and_a_turn_under_valgrind"]


# python -m benchmarks.peers: toolledger beside openai-agents, pydantic-ai and the MCP SDK
PEER_ROWS = {
    "openai-agents": ["openai-agents FunctionTool.on_invoke_tool",
                      "openai-agents Runner.run, scripted Model, "],
    "pydantic-ai": ["pydantic-ai ToolManager.handle_call", "pydantic-ai Agent.run, FunctionModel, "],
    "mcp": ["mcp MCPServer.call_tool", "mcp Client.call_tool, in-memory transport"],
}


def _peers(*options: str) -> tuple[dict[str, Any], str]:
    """``python -m benchmarks.peers --quick --json OPTIONS``: its JSON and its stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.peers", "--quick", "--json",
                           *options], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _installed(peer: str) -> bool:
    from benchmarks.peers import PEERS

    return next(p for p in PEERS if p.name == peer).installed


def test_the_peers_command_times_toolledger_alone() -> None:
    result, _ = _peers("--only", "toolledger")
    rows = result["rows"]
    assert result["settings"]["missing"] == []
    assert list(result["settings"]["versions"]) == ["toolledger"]
    names = [row["figure"]["name"] for row in rows]
    assert names == [
        "toolledger ctx.execute_tool, JsonlStore",
        "toolledger ctx.execute_tool, MemoryStore()",
        "toolledger ctx.execute_tool, MemoryStore(check_encodable=False)",
        "toolledger FauxModel session, JsonlStore, 5 calls",
        "toolledger FauxModel session, MemoryStore(), 5 calls",
        "toolledger FauxModel session, JsonlStore, 20 calls",
        "toolledger FauxModel session, MemoryStore(), 20 calls",
        "toolledger long loop, 20 calls, MemoryStore()",
        "toolledger long loop, 2,000 calls, MemoryStore()",
        "toolledger long loop, 20 calls, JsonlStore",
        "toolledger long loop, 2,000 calls, JsonlStore",
        "toolledger long loop, 20 calls, MemoryStore(), cyclic GC off",
        "toolledger long loop, 2,000 calls, MemoryStore(), cyclic GC off",
    ]
    for row in rows:
        assert row["figure"]["samples"] and min(row["figure"]["samples"]) > 0
        if row["group"] == "tool path":
            assert row["baseline"]["name"] == "bare await add(**args)"
            assert row["comparison"].startswith("+")
    # the longer sessions against the shorter ones, the other store against the default
    looped = [row for row in rows if row["group"] == "agent loop"]
    assert "× its 5-call run" in looped[-1]["comparison"]
    assert "× toolledger (JsonlStore)" in looped[-1]["comparison"]
    # the long loop: each long run against the short one on its store, with the target and
    # what the collector took in the long run
    long = [row for row in rows if row["group"] == "long loop"]
    for short, longer in (long[0:2], long[2:4], long[4:6]):
        assert longer["baseline"]["name"] == short["figure"]["name"]
        assert longer["comparison"].endswith("× its 20-call run")
    for row in long[1], long[3]:
        assert row["target"] == "≤ 1.1× the 20-call run" and row["met"] in (True, False)
        assert re.fullmatch(r"the cyclic collector: \d+\.\d µs a call, \d+ full passes",
                            row["note"]), row["note"]


@pytest.mark.parametrize("store", ["jsonl", "memory", "unchecked"])
def test_the_instructions_probe_runs_on_each_store(store: str) -> None:
    # the code valgrind counts, run without it (the count itself is the slow test's)
    from benchmarks.instructions import PROBE

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for what in ("dispatch", "loop"):
        subprocess.run([sys.executable, "-c", PROBE, what, "3", store], cwd=ROOT, env=env,
                       check=True, capture_output=True, timeout=300)


def test_the_instructions_command_refuses_an_unknown_store() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.instructions", "--store", "disk"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice: 'disk'" in done.stderr


def test_the_peers_command_names_the_peers_not_installed() -> None:
    absent = [peer for peer in PEER_ROWS if not _installed(peer)]
    if not absent:
        pytest.skip("every peer is installed")
    result, stderr = _peers("--only", "toolledger", *absent)
    assert result["settings"]["missing"] == absent
    assert f"not installed, not timed: {', '.join(absent)}" in stderr
    assert "pip install toolledger[bench]" in stderr
    assert all(row["figure"]["name"].startswith("toolledger ") for row in result["rows"])


@pytest.mark.parametrize("peer", list(PEER_ROWS))
def test_a_peer_is_timed_beside_toolledger(peer: str) -> None:
    if not _installed(peer):
        pytest.skip(f"{peer} is not installed (pip install toolledger[bench])")
    result, _ = _peers("--only", "toolledger", peer)
    names = [row["figure"]["name"] for row in result["rows"]]
    assert result["settings"]["missing"] == [] and peer in result["settings"]["versions"]
    for expected in PEER_ROWS[peer]:
        found = [row for row in result["rows"] if row["figure"]["name"].startswith(expected)]
        assert found, (expected, names)
        assert all("× toolledger (JsonlStore)" in row["comparison"] for row in found)
    if peer == "mcp":  # a served call beside the SDK's own server, in the same run
        served = [row for row in result["rows"] if row["group"] == "MCP served"]
        assert [row["figure"]["name"] for row in served] == [
            "mcp Client.call_tool → toolledger mcp_server, JsonlStore",
            "mcp Client.call_tool → toolledger mcp_server, MemoryStore()",
            "mcp Client.call_tool → MCPServer, trio",
            "MCPServer.call_tool alone, trio: its tools/call handler",
            "a host call's four records encoded, proven, sealed and written, nothing else, "
            "JsonlStore",
            "a host call's four records encoded and proven, nothing else, MemoryStore()"]
        assert all(row["comparison"].endswith("× MCPServer") for row in served[:2])
        # a served call's target names its floor exactly when the floor costs more than
        # MCPServer's handler (the part of its call that MCPServer does instead)
        handler = served[3]["figure"]["median"]
        for ours, floor in zip(served[:2], served[4:]):
            assert ours["target"] == "≤ 1.00× MCPServer"
            stopped = ours["met"] is False and floor["figure"]["median"] > handler
            assert bool(ours["floor"]) == stopped
            assert not stopped or ours["floor"].endswith(floor["figure"]["name"])


def test_the_saved_peer_runs_render(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/performance.md's "Peers" table is this run, rendered
    from benchmarks.peers.__main__ import main as peers_main

    # (a run of one group, --group served, renders its rows alike)
    runs = sorted((ROOT / "benchmarks" / "runs" / "peers").glob("*.json"))
    assert runs
    for run in runs:
        assert peers_main(["--render", str(run), "--markdown"]) == 0
        table = capsys.readouterr().out
        assert table.startswith("toolledger and its peers: ")
        for row in json.loads(run.read_text(encoding="utf-8"))["rows"]:
            assert f"| {row['group']} | {row['figure']['name']} |" in table


def test_the_database_stores_are_timed_beside_the_jsonl_store(postgres_server: Any) -> None:
    # python -m benchmarks.databases starts a server of its own (with the server's defaults);
    # the postgres_server fixture only says whether this machine can (it skips or fails if not)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "benchmarks.databases", "--quick", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["settings"]["postgres"] == "measured"
    names = {row["figure"]["name"]: row for row in result["rows"]}
    for store in ("SqliteStore", "PostgresStore"):
        for durable in (False, True):
            for writers in ("one writer", "8 sessions"):
                row = names[f"{store}(durable={durable}), {writers}"]
                assert row["baseline"]["name"] == f"JsonlStore(durable={durable}), {writers}"
    for name in ("SqliteStore(durable=False), one writer", "PostgresStore(durable=False), "
                 "one writer", "PostgresStore(durable=False), 8 sessions"):
        assert names[name]["target"] and isinstance(names[name]["met"], bool)
