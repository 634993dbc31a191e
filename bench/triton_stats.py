"""How Triton batched what a run sent: rows per Triton request and per model execution.

``triton_counts(http_address, model)`` reads the model's cumulative statistics from Triton's
HTTP statistics extension (``GET /v2/models/<model>/stats``: inference count = rows, execution
count = model executions, success count = requests), summed over the model's versions, or
returns None when Triton cannot be asked. ``batch_shape(before, after)`` turns two readings into
the rows per request and per execution in between.
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
    requests = sum(int(s.get("inference_stats", {}).get("success", {}).get("count", 0)) for s in stats)
    return TritonCounts(rows, executions, requests)


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
