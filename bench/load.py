"""A closed-loop load runner and the statistics the report uses.

``closed_loop(send, concurrency, duration_s, warmup_s)`` runs ``concurrency`` asyncio clients;
each awaits ``send(i)`` (``i`` counts that client's requests, offset per client so inputs vary)
and sends its next request as soon as the previous one answers. Requests that *finish* inside
the measurement window ``[start + warmup_s, start + warmup_s + duration_s)`` are counted:
successes give the throughput and latency percentiles, exceptions (including a per-request
timeout) count as errors. After the window no new request starts; those still in flight are
awaited at most ``request_timeout_s`` and then cancelled, so a run never outlasts
``warmup_s + duration_s + request_timeout_s`` by more than scheduling noise.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Send = Callable[[int], Awaitable[None]]
MAX_ERROR_SAMPLES = 5


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    """Median of the non-NaN values; NaN when there are none."""
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


@dataclass
class RunResult:
    """One measured run of one cell (model, path, concurrency)."""

    requests: int
    errors: int
    duration_s: float
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    error_samples: list[str] = field(default_factory=list)
    requests_total: int = 0  # every finished request, warm-up and stragglers included
    cpu_ms_per_request: dict[str, float] = field(default_factory=dict)  # per component, set by the caller
    triton_batching: dict[str, float] = field(default_factory=dict)  # rows per Triton request / execution

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Tally:
    window_start: float
    window_end: float
    latencies_ms: list[float] = field(default_factory=list)
    finished_total: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def record(self, started: float, finished: float, error: BaseException | None) -> None:
        self.finished_total += 1
        if not self.window_start <= finished < self.window_end:
            return
        if error is None:
            self.latencies_ms.append((finished - started) * 1000.0)
            return
        self.errors += 1
        text = f"{type(error).__name__}: {error}"[:300]
        if len(self.error_samples) < MAX_ERROR_SAMPLES and text not in self.error_samples:
            self.error_samples.append(text)


async def _client(send: Send, first_index: int, tally: _Tally, request_timeout_s: float,
                  think_s: float) -> None:
    index = first_index
    while time.perf_counter() < tally.window_end:
        if think_s > 0 and index > first_index:
            await asyncio.sleep(think_s)
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            await asyncio.wait_for(send(index), request_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure is counted, none stops the run
            error = exc
        tally.record(started, time.perf_counter(), error)
        index += 1


async def closed_loop(send: Send, concurrency: int, duration_s: float, warmup_s: float = 1.0,
                      request_timeout_s: float = 30.0, think_s: float = 0.0) -> RunResult:
    """Run the closed loop described in the module docstring and return its numbers; with
    ``think_s`` > 0 each client pauses that long between an answer and its next request."""
    start = time.perf_counter()
    tally = _Tally(start + warmup_s, start + warmup_s + duration_s)
    tasks = [asyncio.create_task(_client(send, c * 1000, tally, request_timeout_s, think_s))
             for c in range(concurrency)]
    budget = warmup_s + duration_s + request_timeout_s + 5.0
    done, pending = await asyncio.wait(tasks, timeout=budget)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        if task.exception() is not None:  # a bug in the harness, not a failed request
            raise task.exception()  # type: ignore[misc]
    ok = len(tally.latencies_ms)
    return RunResult(
        requests=ok, errors=tally.errors, duration_s=duration_s, rps=ok / duration_s,
        p50_ms=percentile(tally.latencies_ms, 50), p99_ms=percentile(tally.latencies_ms, 99),
        max_ms=max(tally.latencies_ms, default=math.nan),
        error_samples=tally.error_samples, requests_total=tally.finished_total,
    )
