"""The scheduling core on real Triton: two pools of different profile, cost and region; a fair
gateway and a FIFO gateway on the same workers (bench.tenancy builds both)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.tenancy.scenarios import capacity, noisy_neighbour, overload, summarize, tier_summary
from bench.tenancy.traffic import Observation, chat, settle
from bench.tenancy.two_pools import KEYS, TwoPoolStack

pytestmark = pytest.mark.integration
MARKER = "zebra-marker-7f3a"


def _auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _wait_idle(url: str, timeout_s: float = 60) -> None:
    """Until the gateway has nothing queued and nothing in flight (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = httpx.get(f"{url}/metrics", timeout=5).text
        prefixes = ("shunter_queue_depth{", "shunter_in_flight_requests{")
        busy = [line for line in text.splitlines() if line.startswith(prefixes) and not line.endswith(" 0.0")]
        if not busy:
            return
        time.sleep(0.5)


def test_noisy_neighbour_is_held_to_its_quota_and_the_quiet_tenant_keeps_its_latency(two_pools: TwoPoolStack) -> None:
    alone = summarize(asyncio.run(noisy_neighbour(two_pools.fair_url, 12, flood=False)), "quiet")
    _wait_idle(two_pools.fair_url)
    fair_seen = asyncio.run(noisy_neighbour(two_pools.fair_url, 12, flood=True))
    _wait_idle(two_pools.fair_url)
    fifo_seen = asyncio.run(noisy_neighbour(two_pools.fifo_url, 12, flood=True))
    _wait_idle(two_pools.fifo_url)
    fair, fifo = summarize(fair_seen, "quiet"), summarize(fifo_seen, "quiet")
    report = f"alone={alone}\nfair={fair}\nfifo={fifo}\nnoisy(fair)={summarize(fair_seen, 'noisy')}"
    assert fair.ok == fair.requests, report
    assert fair.queue_wait_p99_ms <= 50, report
    assert fair.ttft_p99_s <= 2 * alone.ttft_p99_s, report
    assert fifo.ttft_p99_s >= 3 * fair.ttft_p99_s, report
    assert fifo.queue_wait_p99_ms >= 3 * max(fair.queue_wait_p99_ms, 1.0), report
    refused = [o for o in fair_seen if o.tenant == "noisy" and o.status == 429]
    assert refused, report
    assert all(o.retry_after and int(o.retry_after) >= 1 for o in refused), report
    assert {o.code for o in refused} <= {"requests_per_second", "max_concurrent", "tokens_per_minute"}, report


def test_overload_keeps_premium_within_its_slo_and_sheds_batch_first(two_pools: TwoPoolStack) -> None:
    assert two_pools.stack.gateway is not None
    rss_before = _rss_mb(two_pools.stack.gateway.pid)
    per_s = asyncio.run(capacity(two_pools.fair_url, 8))
    _wait_idle(two_pools.fair_url)
    seen = asyncio.run(overload(two_pools.fair_url, per_s, 15))
    _wait_idle(two_pools.fair_url)
    gold, silver, bronze = (tier_summary(seen, t, slo) for t, slo in (("gold", 2.0), ("silver", 4.0), ("bronze", 10.0)))
    report = f"capacity={per_s:.2f}/s\ngold={gold}\nsilver={silver}\nbronze={bronze}"
    assert gold.attainment >= 0.99, report
    shed = {name: 1 - s.completed / s.offered for name, s in (("gold", gold), ("silver", silver), ("bronze", bronze))}
    assert shed["bronze"] > 0.3 and shed["bronze"] >= shed["silver"] >= shed["gold"], (shed, report)
    assert _rss_mb(two_pools.stack.gateway.pid) - rss_before < 100, report


COUNTING = "Count from 1 to 1000, one number per line."


async def _fill_large_pool(client: httpx.AsyncClient, count: int = 8) -> list[asyncio.Task[Observation]]:
    fillers = [asyncio.create_task(chat(client, "eu-only", KEYS["eu-only"], COUNTING, 400)) for _ in range(count)]
    await asyncio.sleep(1.5)  # all dispatched: the large pool's eight sequence slots are taken
    return fillers


def test_a_request_whose_deadline_passes_in_the_queue_ends_with_504_within_50_ms(two_pools: TwoPoolStack) -> None:
    async def scenario() -> tuple[list[float], dict[str, object], int, dict[str, object]]:
        async with httpx.AsyncClient(base_url=two_pools.fair_url, timeout=60) as client:
            fillers = await _fill_large_pool(client)
            body = {"model": "chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}

            async def late(deadline_ms: int) -> float:
                started = time.perf_counter()
                response = await client.post("/v1/chat/completions", json=body,
                                             headers={**_auth("eu-only"), "X-Deadline-Ms": str(deadline_ms)})
                assert response.status_code == 504, response.text
                assert response.json()["error"]["code"] == "deadline_exceeded"
                return time.perf_counter() - started - deadline_ms / 1000

            lateness = [await late(300) for _ in range(5)]  # one at a time: each finds the queue empty
            response = await client.post("/v1/chat/completions", json=body,
                                         headers={**_auth("eu-only"), "X-Deadline-Ms": "800"})
            request_id = response.headers["x-request-id"]
            mine = (await client.get(f"/v1/requests/{request_id}", headers=_auth("eu-only"))).json()
            other = await client.get(f"/v1/requests/{request_id}", headers=_auth("quiet"))
            queued = await _queued_status(client)
            await settle(fillers, cancel_rest=True)
            return lateness, mine, other.status_code, queued

    lateness, mine, other_status, queued = asyncio.run(scenario())
    assert max(lateness) <= 0.05, lateness
    assert mine["status"] == "expired" and mine["outcome"] == "expired(deadline_exceeded)", mine
    assert other_status == 404
    assert queued["status"] == "queued" and queued["queue_position"] == 0, queued
    assert isinstance(queued["estimated_start_in_s"], float)


async def _queued_status(client: httpx.AsyncClient) -> dict[str, object]:
    """Status of a request while it waits (the large pool is still full), found by listing the
    tenant's queued requests."""
    body = {"model": "chat", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    task = asyncio.create_task(client.post("/v1/chat/completions", json=body,
                                           headers={**_auth("eu-only"), "X-Deadline-Ms": "1500"}))
    await asyncio.sleep(0.3)
    listed = (await client.get("/v1/requests", params={"status": "queued"}, headers=_auth("eu-only"))).json()
    assert len(listed["data"]) == 1, listed
    request_id = listed["data"][0]["id"]
    status = (await client.get(f"/v1/requests/{request_id}", headers=_auth("eu-only"))).json()
    assert (await task).status_code == 504
    return status


def test_the_scheduler_reads_each_engines_live_kv_pool(two_pools: TwoPoolStack) -> None:
    text = httpx.get(f"{two_pools.fair_url}/metrics", timeout=5).text
    for worker in ("large-0", "small-0"):
        assert f'shunter_worker_kv_tokens{{state="total",worker="{worker}"}} 8192.0' in text, text[-3000:]


def _learned_prefill_tokens_per_s(url: str, worker: str) -> float | None:
    prefix = f'shunter_worker_prefill_tokens_per_second{{model="chat",worker="{worker}"}} '
    lines = [line for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else None


def test_the_gateway_learns_an_engines_prefill_speed_from_its_first_tokens(two_pools: TwoPoolStack) -> None:
    """Both pools' profiles say 1,500 prompt tokens/s; their one-thread CPU engines do a few
    hundred. Of two prompts sent together to one engine the second queues in its prefill line,
    and its first token shows the gateway how fast the engine really is
    (``scheduling.prediction.prefill_cost``, exported per worker). The tenant is held to the large pool's
    region, so placement cannot spread a pair over both pools; standard tier: loose enough
    objectives that none is refused."""
    _wait_idle(two_pools.fair_url)
    prompt = "Summarize: " + " ".join(f"word{i}" for i in range(60))

    async def pairs() -> list[Observation]:
        seen: list[Observation] = []
        async with httpx.AsyncClient(base_url=two_pools.fair_url, timeout=120) as client:
            for round_ in range(3):
                seen += await asyncio.gather(*(chat(client, "eu-standard", KEYS["eu-standard"],
                                                    f"{round_}-{i}. {prompt}", 2) for i in range(2)))
        return seen

    seen = asyncio.run(pairs())
    assert all(o.ok for o in seen), seen
    assert {o.pool for o in seen} == {"large"}, seen  # one worker per pool: its line was busy
    workers = {"large-0"}
    deadline = time.monotonic() + 10  # the gauges are set when the gateway next polls its workers

    def learned() -> dict[str, float | None]:
        return {w: _learned_prefill_tokens_per_s(two_pools.fair_url, w) for w in workers}

    speeds = learned()
    while any(v is None or v >= 1500 for v in speeds.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
        speeds = learned()
    assert speeds and all(v is not None and 1500 / 4 <= v < 0.8 * 1500 for v in speeds.values()), speeds


def test_placement_respects_residency_context_length_and_cost(two_pools: TwoPoolStack) -> None:
    long_prompt = "Summarize: " + " ".join(f"word{i}" for i in range(700))

    async def scenario() -> dict[str, list[str | None]]:
        async with httpx.AsyncClient(base_url=two_pools.fair_url, timeout=120) as client:
            pools: dict[str, list[str | None]] = {"eu-only": [], "long": [], "bronze": [], "gold": []}
            for i in range(4):
                pools["eu-only"].append((await chat(client, "eu-only", KEYS["eu-only"], f"Say {i}.", 4)).pool)
                pools["bronze"].append((await chat(client, "bronze", KEYS["bronze"], f"Say {i}.", 4)).pool)
                pools["gold"].append((await chat(client, "gold", KEYS["gold"], f"Say {i}.", 4)).pool)
            pools["long"].append((await chat(client, "quiet", KEYS["quiet"], long_prompt, 8)).pool)
            response = await client.post("/v1/embeddings", json={"model": "embed", "input": ["x"] * 3},
                                         headers=_auth("eu-only"))
            pools["eu-only"].append(response.headers.get("x-shunter-pool"))
            return pools

    pools = asyncio.run(scenario())
    assert pools["eu-only"] == ["large"] * 5, pools
    assert pools["long"] == ["large"], pools
    assert pools["bronze"] == ["small"] * 4, pools
    assert pools["gold"] == ["large"] * 4, pools


def _cache_rows(url: str, result: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    prefix = f'shunter_response_cache_rows_total{{model="embed",result="{result}"}} '
    return sum(float(line.removeprefix(prefix)) for line in text.splitlines() if line.startswith(prefix))


def test_outputs_of_many_tenants_in_one_batch_reach_only_their_owner(two_pools: TwoPoolStack) -> None:
    """Each text set is embedded alone by one tenant, then all together by the next tenant: the
    shared Triton batches give every tenant exactly its own rows, and no tenant is served the
    previous tenant's cached vectors (the response cache is private to a tenant)."""
    sets = [[f"{MARKER} set {i} sentence {j} about {['ships', 'bees', 'rain', 'jazz'][j % 4]}" for j in range(5)]
            for i in range(8)]

    async def embed_sets(shift: int, together: bool) -> list[np.ndarray]:
        async with httpx.AsyncClient(base_url=two_pools.fair_url, timeout=60) as client:
            async def one(i: int) -> np.ndarray:
                response = await client.post("/v1/embeddings", json={"model": "embed", "input": sets[i]},
                                             headers=_auth(f"tenant-{(i + shift) % 8}"))
                assert response.status_code == 200, response.text
                return np.array([d["embedding"] for d in response.json()["data"]])
            if together:
                return list(await asyncio.gather(*(one(i) for i in range(8))))
            return [await one(i) for i in range(8)]

    solo = asyncio.run(embed_sets(0, together=False))
    hits_before = _cache_rows(two_pools.fair_url, "hit")
    together = asyncio.run(embed_sets(1, together=True))
    assert _cache_rows(two_pools.fair_url, "hit") == hits_before
    for mine, alone in zip(together, solo, strict=True):
        np.testing.assert_allclose(mine, alone, atol=1e-5)
    again = asyncio.run(embed_sets(1, together=False))
    assert _cache_rows(two_pools.fair_url, "hit") == hits_before + 40
    for cached, alone in zip(again, solo, strict=True):
        np.testing.assert_allclose(cached, alone, atol=1e-5)

    async def chat_with_marker() -> Observation:
        async with httpx.AsyncClient(base_url=two_pools.fair_url, timeout=60) as client:
            return await chat(client, "tenant-0", KEYS["tenant-0"], f"Repeat {MARKER} twice.", 8)
    assert asyncio.run(chat_with_marker()).ok
    logs = "".join(p.read_text(errors="replace") for p in two_pools.paths.logs.glob("*.log"))
    assert MARKER not in logs  # no payloads in any log, the gateways' or the workers'
