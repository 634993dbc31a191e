"""Weighted service of backlogged tenants, per time window (the fairness metrics).

A tenant is backlogged in a window when it had a request in the scheduler's queue for the whole
window. Service is counted when a request leaves the queue for a worker, as the VTC charge
``(prefill + 2 x output) / weight`` with the real output length. Per window and tier, with two or
more backlogged tenants: the gap (largest minus smallest weighted service) and Jain's index of
their weighted service. The tracker sees only the driver's events, so it measures every policy
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.tenants import Tier


def jain_index(values: list[float]) -> float:
    """Jain's fairness index, (Σx)² / (n Σx²): 1 when all equal, 1/n when one gets everything."""
    square = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * square) if square > 0 else 1.0


@dataclass
class ServiceTracker:
    window_s: float
    gaps: list[float] = field(default_factory=list)
    jains: list[float] = field(default_factory=list)
    _start_s: float = 0.0
    _queued: dict[str, int] = field(default_factory=dict)
    _tier: dict[str, Tier] = field(default_factory=dict)
    _service: dict[str, float] = field(default_factory=dict)
    _idle: set[str] = field(default_factory=set)

    def _roll(self, now: float) -> None:
        if now >= self._start_s + 2 * self.window_s and not any(self._queued.values()):
            self._close_window()  # nobody backlogged: skip the empty windows at once
            skipped = int((now - self._start_s) / self.window_s)
            self._start_s += skipped * self.window_s
            self._idle, self._service = set(self._queued), {}
        while now >= self._start_s + self.window_s:
            self._close_window()
            self._start_s += self.window_s
            self._idle = {t for t, count in self._queued.items() if count == 0}
            self._service = {}

    def _close_window(self) -> None:
        by_tier: dict[Tier, list[float]] = {}
        for tenant in sorted(self._queued):
            if tenant not in self._idle:
                by_tier.setdefault(self._tier[tenant], []).append(self._service.get(tenant, 0.0))
        for values in by_tier.values():
            if len(values) >= 2:
                self.gaps.append(max(values) - min(values))
                self.jains.append(jain_index(values))

    def queued(self, tenant: str, tier: Tier, now: float) -> None:
        self._roll(now)
        if tenant not in self._queued and now > self._start_s:
            self._idle.add(tenant)  # it was not backlogged since the window began
        self._tier[tenant] = tier
        self._queued[tenant] = self._queued.get(tenant, 0) + 1

    def left_queue(self, tenant: str, tier: Tier, now: float, charge: float) -> None:
        self._roll(now)
        self._service[tenant] = self._service.get(tenant, 0.0) + charge
        self._queued[tenant] -= 1
        if self._queued[tenant] == 0:
            self._idle.add(tenant)

    def close(self, now: float) -> None:
        self._roll(now)

    @property
    def max_gap(self) -> float | None:
        return max(self.gaps) if self.gaps else None

    @property
    def mean_jain(self) -> float | None:
        return sum(self.jains) / len(self.jains) if self.jains else None
