"""How Triton batched and queued what a run sent: rows per Triton request and per model
execution, and the time requests waited in Triton's own scheduler queue.

``triton_counts(http_address, model)`` reads the model's cumulative statistics from Triton's
HTTP statistics extension (``GET /v2/models/<model>/stats``: inference count = rows, execution
count = model executions, success count = requests, queue count and ns = requests through the
scheduler queue and their total wait), summed over the model's versions, or returns None when
Triton cannot be asked. ``batch_shape(before, after)`` turns two readings into the rows per
request and per execution in between, ``queue_wait(before, after)`` into the mean queue wait.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

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
