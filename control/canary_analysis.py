"""Canary analysis: compare a candidate version with its baseline over a sliding window.

Pure: ``VersionWindow`` is what one version did in the window (requests completed and failed, a
latency histogram's counts); ``judge(baseline, canary, thresholds)`` returns a frozen ``Verdict``
whose numbers go into the audit log as they are. The candidate is rolled back when, with at least
``min_requests`` in the window for both versions,
- its error rate (failed / (completed + failed)) exceeds the baseline's by more than
  ``max_error_rate_delta``, or
- its p99 latency (time to first token for LLMs) exceeds ``max_latency_ratio`` times the baseline's
  and by more than ``min_latency_delta_s`` (so two fast versions a few ms apart do not trip it).
``MetricsHistory`` turns successive scrapes of the gateways' cumulative counters into windows:
the difference between the newest snapshot and the newest one at least ``window_s`` old.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# (model, version) -> cumulative counters of one scrape (summed over gateways)
VersionKey = tuple[str, str]


@dataclass(frozen=True)
class VersionCounters:
    """Cumulative counters of one model version; ``latency_buckets`` maps an upper bound in s to
    the cumulative count of completed requests at or under it (a Prometheus histogram)."""

    completed: float = 0.0
    failed: float = 0.0
    latency_buckets: tuple[tuple[float, float], ...] = ()

    def minus(self, earlier: VersionCounters) -> VersionCounters:
        before = dict(earlier.latency_buckets)
        return VersionCounters(
            max(0.0, self.completed - earlier.completed), max(0.0, self.failed - earlier.failed),
            tuple((bound, max(0.0, count - before.get(bound, 0.0))) for bound, count in self.latency_buckets))


@dataclass(frozen=True)
class VersionWindow:
    version: int
    requests: int
    errors: int
    p99_latency_s: float | None

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @classmethod
    def of(cls, version: int, counters: VersionCounters) -> VersionWindow:
        requests = round(counters.completed + counters.failed)
        return cls(version, requests, round(counters.failed), p99(counters.latency_buckets))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error_rate": self.error_rate}


def p99(buckets: tuple[tuple[float, float], ...], quantile: float = 0.99) -> float | None:
    """The quantile of a cumulative histogram, interpolated linearly inside its bucket."""
    ordered = sorted((b, c) for b, c in buckets if not math.isinf(b))
    total = max((c for b, c in buckets), default=0.0)
    if total <= 0:
        return None
    target = quantile * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= target:
            share = (target - lower_count) / (count - lower_count) if count > lower_count else 1.0
            return lower_bound + share * (bound - lower_bound)
        lower_bound, lower_count = bound, count
    return ordered[-1][0] if ordered else None


@dataclass(frozen=True)
class Thresholds:
    min_requests: int = 20
    max_error_rate_delta: float = 0.05
    max_latency_ratio: float = 2.0
    min_latency_delta_s: float = 0.05

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> Thresholds:
        known = {k: v for k, v in values.items() if k in cls.__dataclass_fields__}
        return cls(**{k: (int(v) if k == "min_requests" else float(v)) for k, v in known.items()})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Verdict:
    """``decision`` is ``rollback``, ``healthy`` or ``insufficient_data``."""

    decision: str
    reason: str
    baseline: VersionWindow
    canary: VersionWindow
    thresholds: Thresholds

    def as_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "reason": self.reason, "baseline": self.baseline.as_dict(),
                "canary": self.canary.as_dict(), "thresholds": asdict(self.thresholds)}


def judge(baseline: VersionWindow, canary: VersionWindow, thresholds: Thresholds) -> Verdict:
    """The verdict on ``canary`` against ``baseline``; see the module docstring."""
    def verdict(decision: str, reason: str) -> Verdict:
        return Verdict(decision, reason, baseline, canary, thresholds)
    if min(baseline.requests, canary.requests) < thresholds.min_requests:
        return verdict("insufficient_data", f"fewer than {thresholds.min_requests} requests per version in the "
                                            f"window (baseline {baseline.requests}, canary {canary.requests})")
    base_rate, canary_rate = baseline.error_rate or 0.0, canary.error_rate or 0.0
    if canary_rate - base_rate > thresholds.max_error_rate_delta:
        return verdict("rollback", f"error rate {canary_rate:.1%} vs baseline {base_rate:.1%} "
                                   f"(allowed +{thresholds.max_error_rate_delta:.1%})")
    base_p99, canary_p99 = baseline.p99_latency_s, canary.p99_latency_s
    if (base_p99 is not None and canary_p99 is not None
            and canary_p99 > thresholds.max_latency_ratio * base_p99
            and canary_p99 - base_p99 > thresholds.min_latency_delta_s):
        return verdict("rollback", f"p99 latency {canary_p99 * 1000:.0f} ms vs baseline {base_p99 * 1000:.0f} ms "
                                   f"(allowed {thresholds.max_latency_ratio:.1f}x)")
    return verdict("healthy", f"error rate {canary_rate:.1%} vs {base_rate:.1%}; within thresholds")


@dataclass
class MetricsHistory:
    """Timestamped scrapes, kept for ``window_s`` plus one older snapshot to subtract."""

    window_s: float
    _snapshots: deque[tuple[float, dict[VersionKey, VersionCounters]]] = field(default_factory=deque)

    def add(self, now_s: float, snapshot: dict[VersionKey, VersionCounters]) -> None:
        self._snapshots.append((now_s, snapshot))
        while len(self._snapshots) > 2 and self._snapshots[1][0] <= now_s - self.window_s:
            self._snapshots.popleft()

    def window(self, model: str, version: int) -> VersionWindow:
        """What ``version`` of ``model`` did between the oldest kept snapshot and the newest."""
        if not self._snapshots:
            return VersionWindow(version, 0, 0, None)
        key = (model, str(version))
        newest = self._snapshots[-1][1].get(key, VersionCounters())
        oldest = self._snapshots[0][1].get(key, VersionCounters()) if len(self._snapshots) > 1 else VersionCounters()
        return VersionWindow.of(version, newest.minus(oldest))
