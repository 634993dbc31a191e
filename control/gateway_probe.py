"""What the gateways report, read from their Prometheus ``/metrics``: the routing generation each
one runs, the requests still bound to a model version, and per-version outcome counters and
latency histograms for the canary analysis. Every read is bounded by ``timeout_s``; a gateway
that does not answer is reported as such, never waited on forever.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from control.canary_analysis import VersionCounters, VersionKey
from control.errors import ControlError
from scheduling.outcomes import Outcome


class GatewayProbeError(ControlError, RuntimeError):
    """A gateway did not answer, or did not reach the wanted state in time."""


@dataclass(frozen=True)
class GatewayReading:
    url: str
    routing_generation: int | None
    open_requests: dict[VersionKey, float]
    counters: dict[VersionKey, VersionCounters]


def _parse(url: str, text: str) -> GatewayReading:
    generation: int | None = None
    open_requests: dict[VersionKey, float] = {}
    completed: dict[VersionKey, float] = defaultdict(float)
    failed: dict[VersionKey, float] = defaultdict(float)
    buckets: dict[VersionKey, list[tuple[float, float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            key = (labels.get("model", ""), labels.get("version", ""))
            if sample.name == "shunter_routing_generation":
                generation = int(sample.value)
            elif sample.name == "shunter_version_requests_open":
                open_requests[key] = sample.value
            elif sample.name == "shunter_version_requests_total":
                outcome = labels.get("outcome")
                if outcome == Outcome.COMPLETED:
                    completed[key] += sample.value
                elif outcome == Outcome.FAILED:
                    failed[key] += sample.value
            elif sample.name == "shunter_version_latency_seconds_bucket":
                buckets[key].append((float(labels["le"]), sample.value))
    keys = set(completed) | set(failed) | set(buckets)
    counters = {k: VersionCounters(completed.get(k, 0.0), failed.get(k, 0.0), tuple(sorted(buckets.get(k, []))))
                for k in keys}
    return GatewayReading(url, generation, open_requests, counters)


def read(urls: Sequence[str], timeout_s: float = 2.0, headers: Mapping[str, str] | None = None) -> list[GatewayReading]:
    """One reading per gateway (``headers``: the metrics token, when the gateways require one);
    raise GatewayProbeError naming any that did not answer."""
    readings = []
    with httpx.Client(timeout=timeout_s, headers=dict(headers or {})) as client:
        for url in urls:
            try:
                response = client.get(f"{url.rstrip('/')}/metrics")
                response.raise_for_status()
            except httpx.HTTPError as exc:
                raise GatewayProbeError(f"gateway {url} did not answer: {exc}") from exc
            readings.append(_parse(url, response.text))
    return readings


def summed_counters(readings: Sequence[GatewayReading]) -> dict[VersionKey, VersionCounters]:
    """Per-version counters added up over every gateway."""
    total: dict[VersionKey, VersionCounters] = {}
    for reading in readings:
        for key, counters in reading.counters.items():
            before = total.get(key)
            if before is None:
                total[key] = counters
                continue
            merged = dict(before.latency_buckets)
            for bound, count in counters.latency_buckets:
                merged[bound] = merged.get(bound, 0.0) + count
            total[key] = VersionCounters(before.completed + counters.completed, before.failed + counters.failed,
                                         tuple(sorted(merged.items())))
    return total


def wait_until(urls: Sequence[str], satisfied: str, check: Callable[[list[GatewayReading]], bool], timeout_s: float,
               poll_s: float = 0.1, headers: Mapping[str, str] | None = None) -> float:
    """Poll the gateways until ``check(readings)`` is true; return the seconds it took.

    ``satisfied`` describes the state for the error message."""
    started = time.monotonic()
    last_error = ""
    while True:
        try:
            if check(read(urls, headers=headers)):
                return time.monotonic() - started
        except GatewayProbeError as exc:
            last_error = f" (last error: {exc})"
        if time.monotonic() - started > timeout_s:
            raise GatewayProbeError(f"gateways did not reach '{satisfied}' within {timeout_s:.0f} s{last_error}")
        time.sleep(poll_s)
