"""How Triton batched and queued what a run sent: rows per Triton request and per model
execution, and the time requests waited in Triton's own scheduler queue.

``triton_counts(http_address, model)`` reads the model's cumulative statistics from Triton's
HTTP statistics extension (``GET /v2/models/<model>/stats``: inference count = rows, execution
count = model executions, success count = requests, queue count and ns = requests through the
scheduler queue and their total wait), summed over the model's versions, or returns None when
Triton cannot be asked. ``batch_shape(before, after)`` turns two readings into the rows per
request and per execution in between, ``queue_wait(before, after)`` into the mean queue wait.

``engine_counters(metrics_address)`` reads the LLM engine's step counters from Triton's metrics
port (``shunter_llm_*_total``, summed over models and instances); ``engine_busy(before, after)``
turns two readings into what the engine did in between (``simulator.perf.fitted.EngineBusy``'s fields);
``sample_engine_counters`` reads them every ``interval_s`` until told to stop (a run's timeline).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

STATS_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TritonCounts:
    rows: int
    executions: int
    requests: int
    queued: int = 0
    queue_ns: int = 0


async def triton_counts(http_address: str, model: str) -> TritonCounts | None:
    """The model's cumulative row, execution and request counts, or None if unavailable."""
    try:
        async with httpx.AsyncClient(timeout=STATS_TIMEOUT_S) as client:
            response = await client.get(f"http://{http_address}/v2/models/{model}/stats")
        stats = response.json()["model_stats"] if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    rows = sum(int(s.get("inference_count", 0)) for s in stats)
    executions = sum(int(s.get("execution_count", 0)) for s in stats)
    inference = [s.get("inference_stats", {}) for s in stats]
    requests = sum(int(i.get("success", {}).get("count", 0)) for i in inference)
    queued = sum(int(i.get("queue", {}).get("count", 0)) for i in inference)
    queue_ns = sum(int(i.get("queue", {}).get("ns", 0)) for i in inference)
    return TritonCounts(rows, executions, requests, queued, queue_ns)


def batch_shape(before: TritonCounts | None, after: TritonCounts | None) -> dict[str, float]:
    """``rows_per_request`` and ``rows_per_execution`` between two readings (empty if unknown)."""
    if before is None or after is None:
        return {}
    rows, executions = after.rows - before.rows, after.executions - before.executions
    requests = after.requests - before.requests
    shape = {}
    if requests > 0:
        shape["rows_per_request"] = rows / requests
    if executions > 0:
        shape["rows_per_execution"] = rows / executions
    return shape


def queue_wait(before: TritonCounts | None, after: TritonCounts | None) -> dict[str, float] | None:
    """``requests`` through Triton's queue between two readings and their ``mean_wait_ms``; None
    if unknown or none passed."""
    if before is None or after is None or after.queued <= before.queued:
        return None
    requests = after.queued - before.queued
    return {"requests": requests, "mean_wait_ms": (after.queue_ns - before.queue_ns) / requests / 1e6}


ENGINE_COUNTERS = {"steps": "shunter_llm_steps_total", "step_s": "shunter_llm_step_seconds_total",
                   "prefill_tokens": "shunter_llm_prefill_tokens_total",
                   "decode_tokens": "shunter_llm_decode_tokens_total",
                   "attention_positions": "shunter_llm_attention_positions_total",
                   "prefix_hit_tokens": "shunter_llm_prefix_hit_tokens_total",
                   "preemptions": "shunter_llm_preemptions_total"}


async def engine_counters(metrics_address: str) -> dict[str, float] | None:
    """The engine's cumulative step counters (keys of ``ENGINE_COUNTERS``), or None if unavailable."""
    try:
        async with httpx.AsyncClient(timeout=STATS_TIMEOUT_S) as client:
            response = await client.get(f"http://{metrics_address}/metrics")
        return engine_counter_totals(response.text) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def engine_counter_totals(metrics_text: str) -> dict[str, float] | None:
    """``ENGINE_COUNTERS`` summed over their labels in a Prometheus text page; None unless every
    one of them is there (an engine without step counters). Raise ValueError on a malformed page."""
    by_sample = {name: key for key, name in ENGINE_COUNTERS.items()}
    totals = dict.fromkeys(ENGINE_COUNTERS, 0.0)
    seen = set()
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name in by_sample:
                totals[by_sample[sample.name]] += sample.value
                seen.add(sample.name)
    return totals if seen == set(ENGINE_COUNTERS.values()) else None


def engine_busy(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """What the counters grew by between two readings (None if either is unknown)."""
    if before is None or after is None:
        return None
    return {key: after[key] - before[key] for key in ENGINE_COUNTERS}


async def sample_engine_counters(metrics_address: str, done: asyncio.Event,
                                 interval_s: float = 10.0) -> list[tuple[float, dict[str, float]]]:
    """``(seconds since the start, counters)`` every ``interval_s`` until ``done`` is set, and once
    more then (readings that fail are skipped)."""
    started = time.monotonic()
    samples: list[tuple[float, dict[str, float]]] = []
    while True:
        counters = await engine_counters(metrics_address)
        if counters is not None:
            samples.append((time.monotonic() - started, counters))
        if done.is_set():
            return samples
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), interval_s)
