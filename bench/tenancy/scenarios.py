"""The two scenarios of the scheduling issue, run against a gateway URL, and their summaries.

* ``noisy_neighbour``: tenant ``quiet`` sends a steady moderate mix (chat streams and embedding
  batches); with ``flood`` the tenant ``noisy`` sends ten times its requests-per-second quota of
  the same kinds, larger. The quiet tenant's queue wait and TTFT are what the policy protects.
* ``overload``: first the capacity (closed loop, completed chat requests per second), then three
  tiers offered together 3x that rate (premium 0.5x, standard 1x, batch 1.5x), open loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.load import percentile
from bench.tenancy.traffic import Observation, chat, embed, open_loop, settle
from bench.tenancy.two_pools import KEYS

QUIET_CHAT_PER_S = 1.0
QUIET_EMBED_PER_S = 4.0
NOISY_QUOTA_PER_S = 2.0
FLOOD_FACTOR = 10
TOPICS = ("trains", "the sea", "autumn", "coffee", "mountains", "a cat", "the moon", "bread")


def _client(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(90.0), limits=limits)


async def noisy_neighbour(url: str, duration_s: float, flood: bool, noisy_url: str | None = None) -> list[Observation]:
    """Observations of both tenants; the noisy tenant's unfinished requests are cancelled at the
    end (its clients go away), the quiet tenant's are awaited. ``noisy_url``: the noisy tenant
    sends to another gateway of the fleet (default: the same ``url``)."""
    async with _client(url) as client, _client(noisy_url or url) as noisy_client:
        def quiet_chat(i: int) -> Any:
            return chat(client, "quiet", KEYS["quiet"], f"Name one fact about {TOPICS[i % len(TOPICS)]}.", 16)

        def quiet_embed(i: int) -> Any:
            return embed(client, "quiet", KEYS["quiet"], [f"quiet sentence {i} {j}" for j in range(4)])

        def noisy(i: int) -> Any:
            if i % 2:
                return embed(noisy_client, "noisy", KEYS["noisy"], [f"noisy sentence {i} {j}" for j in range(32)])
            return chat(noisy_client, "noisy", KEYS["noisy"], f"Write a long story about {TOPICS[i % len(TOPICS)]}.",
                        64)

        loads = [open_loop(QUIET_CHAT_PER_S, duration_s, quiet_chat),
                 open_loop(QUIET_EMBED_PER_S, duration_s, quiet_embed)]
        if flood:
            loads.append(open_loop(NOISY_QUOTA_PER_S * FLOOD_FACTOR, duration_s, noisy))
        started = await asyncio.gather(*loads)
        quiet = await settle(started[0] + started[1])
        noisy_seen = await settle(started[2], cancel_rest=True) if flood else []
    return quiet + noisy_seen


@dataclass(frozen=True)
class TenantSummary:
    requests: int
    ok: int
    queue_wait_p99_ms: float
    ttft_p50_s: float
    ttft_p99_s: float
    engine_p99_s: float
    embed_p99_s: float
    rejected: dict[str, int]


def summarize(observations: list[Observation], tenant: str) -> TenantSummary:
    mine = [o for o in observations if o.tenant == tenant]
    ok = [o for o in mine if o.ok]
    waits = [o.queue_wait_s * 1000 for o in ok if o.queue_wait_s is not None]
    ttft = [o.ttft_s for o in ok if o.kind == "chat" and o.ttft_s is not None]
    engine = [o.engine_s for o in ok if o.kind == "chat" and o.engine_s is not None]
    embed_latency = [o.total_s for o in ok if o.kind == "embed"]
    rejected: dict[str, int] = {}
    for o in mine:
        if not o.ok:
            key = f"{o.status} {o.code}"
            rejected[key] = rejected.get(key, 0) + 1
    return TenantSummary(len(mine), len(ok), percentile(waits, 99), percentile(ttft, 50), percentile(ttft, 99),
                         percentile(engine, 99), percentile(embed_latency, 99), rejected)


async def capacity(url: str, duration_s: float, concurrency: int = 16, max_tokens: int = 16) -> float:
    """Completed chat requests per second with ``concurrency`` premium clients always waiting:
    clients start requests for ``duration_s``, and the rate is every completion over the time
    until the last one ends (so requests still in flight at the end are not lost from the count)."""
    completed = 0
    started = time.perf_counter()
    stop_at = started + duration_s
    async with _client(url) as client:
        async def worker(w: int) -> None:
            nonlocal completed
            i = 0
            while time.perf_counter() < stop_at:
                seen = await chat(client, "gold", KEYS["gold"], f"Name one fact about {TOPICS[(w + i) % 8]}.",
                                  max_tokens)
                completed += seen.ok
                i += 1
        await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(concurrency))), duration_s + 90)
    return completed / (time.perf_counter() - started)


TIER_SHARES = {"gold": 0.5, "silver": 1.0, "bronze": 1.5}


async def overload(url: str, capacity_per_s: float, duration_s: float, max_tokens: int = 16) -> list[Observation]:
    """Three tiers offered together at 3x ``capacity_per_s``; every observation, unfinished ones
    cancelled after the settle timeout."""
    async with _client(url) as client:
        def sender(tenant: str) -> Any:
            def make(i: int) -> Any:
                return chat(client, tenant, KEYS[tenant], f"Name one fact about {TOPICS[i % 8]}.", max_tokens)
            return make

        started = await asyncio.gather(*(open_loop(share * capacity_per_s, duration_s, sender(tenant))
                                         for tenant, share in TIER_SHARES.items()))
        return await settle([task for tasks in started for task in tasks], timeout_s=60)


@dataclass(frozen=True)
class TierSummary:
    offered: int
    completed: int
    within_slo: int
    attainment: float
    rejected: dict[str, int]
    ttft_p99_s: float


def tier_summary(observations: list[Observation], tenant: str, ttft_slo_s: float) -> TierSummary:
    mine = [o for o in observations if o.tenant == tenant]
    ok = [o for o in mine if o.ok]
    within = [o for o in ok if o.ttft_s is not None and o.ttft_s <= ttft_slo_s]
    rejected: dict[str, int] = {}
    for o in mine:
        if not o.ok:
            key = f"{o.status} {o.code}"
            rejected[key] = rejected.get(key, 0) + 1
    ttft = [o.ttft_s for o in ok if o.ttft_s is not None]
    return TierSummary(len(mine), len(ok), len(within), len(within) / len(mine) if mine else float("nan"),
                       rejected, percentile(ttft, 99))
