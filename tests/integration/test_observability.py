"""Observability on the real stack: a real Prometheus scrapes the session's stack (gateway, control and
the Triton worker found through control's service discovery) while mixed traffic runs; every
dashboard panel's query then returns series carrying the labels its legend names, and the access
log of the run holds the request ids but none of the prompts or keys that were sent."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from cli.observe.dashboards import QUERIES, RATE, Query
from control.prometheus import LocalPrometheus, scrape_config
from tests.integration.conftest import KEYS, RunningStack
from tests.integration.ports import port

pytestmark = pytest.mark.integration
PROMETHEUS_PORT = port(29095)
SECRET = "zebra-quartz-4417"  # in every prompt; must never reach a log
QUERY_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def prometheus(stack: RunningStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPrometheus]:
    server = LocalPrometheus(PROMETHEUS_PORT, tmp_path_factory.mktemp("prometheus"))
    server.start(scrape_config([stack.url], stack.stack.control_url, stack.paths.admin_token_file, interval_s=1.0))
    try:
        yield server
    finally:
        server.stop()


async def _chat(client: httpx.AsyncClient, key: str) -> int:
    body = {"model": "chat", "messages": [{"role": "user", "content": f"Say hello to {SECRET}."}],
            "max_tokens": 6, "temperature": 0, "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {key}"}) as response:
        await response.aread()
        return response.status_code


async def _chat_left_early(client: httpx.AsyncClient) -> None:
    """A streamed chat whose client goes away after its first token (cancelled: an error by version)."""
    body = {"model": "chat", "messages": [{"role": "user", "content": f"Count to 50 for {SECRET}."}],
            "max_tokens": 60, "temperature": 0, "stream": True}
    async with client.stream("POST", "/v1/chat/completions", json=body,
                             headers={"Authorization": f"Bearer {KEYS['standard']}"}) as response:
        async for line in response.aiter_lines():
            if '"content"' in line and '"content":""' not in line.replace(" ", ""):
                break


async def _embed(client: httpx.AsyncClient, key: str) -> int:
    response = await client.post("/v1/embeddings", json={"model": "embed", "input": [f"{SECRET} cat"]},
                                 headers={"Authorization": f"Bearer {key}"})
    return response.status_code


async def _mixed_load(url: str) -> list[int]:
    """Streamed chats of premium and standard (one left early), embeddings and rerank, a bad key, and an embeddings
    request of the batch tenant that costs more than its tokens-per-minute quota (an admission refusal)."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        statuses = list(await asyncio.gather(_chat(client, KEYS["premium"]), _chat(client, KEYS["standard"]),
                                             _chat(client, KEYS["premium"])))
        rerank = await client.post("/v1/rerank", headers={"Authorization": f"Bearer {KEYS['standard']}"},
                                   json={"model": "rerank", "query": SECRET, "documents": ["a", "b"]})
        statuses.append(rerank.status_code)
        await _chat_left_early(client)
        statuses.append(await _embed(client, "sk-wrong-key-" + SECRET))
        statuses += await asyncio.gather(*(_embed(client, KEYS["batch"]) for _ in range(4)))
        too_large = await client.post("/v1/embeddings", headers={"Authorization": f"Bearer {KEYS['batch']}"},
                                      json={"model": "embed", "input": ["cat " * 240] * 450})  # ~109k > 100k tokens
        statuses.append(too_large.status_code)
        assert too_large.json()["error"]["code"] == "too_large", too_large.text
    return statuses


def _query(prometheus: LocalPrometheus, expr: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _series_with_legend(prometheus: LocalPrometheus, query: Query) -> list[dict[str, Any]]:
    """The query's series once every one carries the legend's labels (bounded wait: scrapes and rules
    run every second, rates need two samples)."""
    expr = query.expr.replace(RATE, "30s")
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while True:
        result = _query(prometheus, expr)
        if result and all(set(query.legend_labels) <= set(r["metric"]) for r in result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{expr}: no series with labels {query.legend_labels}: {result}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def load(stack: RunningStack, prometheus: LocalPrometheus) -> list[int]:
    """The mixed traffic, run once while Prometheus scrapes (its statuses)."""
    return asyncio.run(_mixed_load(stack.url))


def test_every_panel_query_returns_series_with_its_legend_labels(stack: RunningStack, prometheus: LocalPrometheus,
                                                                 load: list[int]) -> None:
    assert load[:4] == [200, 200, 200, 200] and load[4] == 401
    assert load[5:] == [200, 200, 200, 200, 400]
    targets = _series_with_legend(prometheus, Query('up{job="triton"}', "{{worker}}"))  # found through control
    assert [(t["metric"]["worker"], t["value"][1]) for t in targets] == [(stack.worker.name, "1")]
    for query in QUERIES:
        if query.needs_capacity_controller:  # this stack runs none: the query must still parse
            _query(prometheus, query.expr.replace(RATE, "30s"))
            continue
        _series_with_legend(prometheus, query)
    rules = httpx.get(f"{prometheus.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    assert all(rule["health"] == "ok" for group in rules for rule in group["rules"]), rules


def test_the_access_log_names_each_request_and_holds_no_prompt_or_key(stack: RunningStack, load: list[int]) -> None:
    logs: list[Path] = sorted(stack.paths.logs.glob("gateway-*.access.jsonl"))
    lines = [orjson.loads(row) for path in logs for row in path.read_text().splitlines()]
    chats = [line for line in lines if line.get("route") == "/v1/chat/completions" and line["status"] == 200
             and line.get("tier") == "premium"]
    assert chats and all(line["request_id"].startswith("req_") and line["tenant"] == "demo-premium" for line in chats)
    assert all(line["worker"] == stack.worker.name and line["tokens_out"] > 0 and line["ttft_ms"] > 0
               for line in chats)
    refused = [line for line in lines if line.get("reason") == "too_large"]
    assert refused and refused[-1]["status"] == 400 and refused[-1]["tenant"] == "demo-batch"
    text = "".join(path.read_text() for path in logs)
    for secret in (SECRET, *KEYS.values(), "sk-wrong-key"):
        assert secret not in text


def test_shunter_top_shows_the_stack_in_a_terminal(stack: RunningStack, load: list[int], tmp_path: Path) -> None:
    """``shunter top`` in a real terminal (tmux): after the traffic, its view names the models, the
    worker and the tenants; read with capture-pane, ended with Ctrl-C."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing (Debian's tmux)")
    session = f"shunter-top-{PROMETHEUS_PORT}"
    command = (f"{sys.executable} -m cli.main top --gateway-url {stack.url} --control-url {stack.stack.control_url} "
               f"--token-file {stack.paths.admin_token_file} --interval 0.5")
    tmux = ["tmux", "-L", session]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "60", command],
                   check=True, timeout=10, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        screen = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(w in screen for w in ("local-cpu-0", "embed", "demo-")):
            time.sleep(0.5)
            screen = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                                    timeout=10).stdout
        assert "Models (last interval)" in screen and "local-cpu-0" in screen and "embed" in screen, screen
        assert "demo-" in screen, screen  # a tenant's tokens
        subprocess.run([*tmux, "send-keys", "-t", session, "C-c"], check=True, timeout=10)
    finally:
        subprocess.run([*tmux, "kill-server"], timeout=10, check=False)
