"""Record and replay: traffic sent through the real stack, exported from the gateway's access log
with ``shunter traffic export``, replayed by ``shunter sim sweep --trace`` (the few recorded
requests repeated to the 50 the experiments need to measure capacity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from simulator.trace_files import read_trace
from tests.integration.conftest import KEYS, RunningStack

pytestmark = pytest.mark.integration


def test_recorded_traffic_is_exported_and_replayed(stack: RunningStack, tmp_path: Path) -> None:
    prompts = ["Name one planet.", "Say hello in French, then in German, then in Spanish."]
    for key, prompt in zip(("premium", "batch"), prompts, strict=True):
        with stack.client(KEYS[key]) as client:
            response = client.post("/v1/chat/completions", json={
                "model": "chat", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8,
                "temperature": 0})
            assert response.status_code == 200, response.text
    with stack.client() as client:  # another model's request, left out by --model chat
        assert client.post("/v1/embeddings", json={"model": "embed", "input": "x"}).status_code == 200

    trace = tmp_path / "recorded.jsonl"
    runner = CliRunner()
    result = runner.invoke(app, ["traffic", "export", "--since", "10m", "--model", "chat", "--out", str(trace),
                                 "--state-dir", str(stack.paths.state_dir)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert prompts[0] not in trace.read_text(), "lengths only, never text"
    recorded = rows[-2:]
    assert [r["tenant"] for r in recorded] == ["demo-premium", "demo-batch"]
    assert all(r["model"] == "chat" and r["prompt_tokens"] > 5 and 0 < r["output_tokens"] <= 8 for r in recorded)
    assert {r["model"] for r in rows} == {"chat"}
    assert [r.prompt_tokens for r in read_trace(trace)][-2:] == [r["prompt_tokens"] for r in recorded]

    # Replay: the recorded requests (as many times over as the experiments need) through the simulator.
    replay = tmp_path / "replay.jsonl"
    lines = trace.read_text().splitlines()
    span_s = rows[-1]["arrival_s"] + 1.0
    replay.write_text("".join(json.dumps({**json.loads(line), "arrival_s": json.loads(line)["arrival_s"] + k * span_s})
                              + "\n" for k in range(-(-60 // len(lines))) for line in lines))
    result = runner.invoke(app, ["sim", "sweep", "--trace", str(replay), "--loads", "1", "--pool", "h100:1",
                                 "--out", str(tmp_path / "sim")])
    assert result.exit_code == 0, result.output
