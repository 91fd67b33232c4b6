"""``toolledger demo --model``: the demo's tools against a real model's API (here the
loopback server's recorded payloads), and the default that needs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from engine.cli import main
from engine.core.reducers import fold
from engine.demo import LOG_NAME, SYSTEM_PROMPT
from events.modelturns import ModelRequested, ModelResponded, SystemPromptSet
from events.stores import read_jsonl
from tests.models.server import payload, serving


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_demo_runs_against_a_real_api(provider: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    api = "chat" if provider == "openai" else "anthropic"
    async with serving([payload(api, "demo_read"), payload(api, "final_text")]) as server:
        base_url = f"{server.url}/v1" if provider == "openai" else server.url
        status = await trio.to_thread.run_sync(main, [
            "demo", "--approve", "none", "--workdir", str(tmp_path), "--model",
            f"{provider}:test-model", "--base-url", base_url])
    out = capsys.readouterr().out
    assert status == 0
    assert f"model: {provider}:test-model" in out and "read_file" in out
    records = read_jsonl(tmp_path / LOG_NAME)
    assert [r.event for r in records if isinstance(r.event, SystemPromptSet)] == [
        SystemPromptSet(text=SYSTEM_PROMPT)]
    asked = [r.event for r in records if isinstance(r.event, ModelRequested)]
    assert [(a.provider, a.model) for a in asked] == [(provider, "test-model")] * 2
    assert len([r for r in records if isinstance(r.event, ModelResponded)]) == 2
    projection = fold(records)
    assert {v.name: v.status for v in projection.calls.values()} == {"read_file": "completed"}
    assert projection.usage.output_tokens == 18 + 3
    assert "tokens:" in out
    # the command line runs its own trio loop: from here, in a thread, as the demo ran
    assert await trio.to_thread.run_sync(main, ["show", "--json", str(tmp_path / LOG_NAME)]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert shown["usage"] == {"input_tokens": 120 + 160, "output_tokens": 18 + 3,
                              "cached_tokens": 64}


def test_a_model_spec_without_a_key_or_url_says_what_to_set(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["demo", "--workdir", str(tmp_path), "--model", "openai:gpt-4.1-mini"]) == 1
    assert "set OPENAI_API_KEY" in capsys.readouterr().err
    assert main(["demo", "--workdir", str(tmp_path), "--model", "gemini"]) == 1
    assert "PROVIDER:MODEL" in capsys.readouterr().err
    assert main(["demo", "--workdir", str(tmp_path), "--base-url", "http://127.0.0.1:1"]) == 1
    assert "--base-url needs --model" in capsys.readouterr().err
