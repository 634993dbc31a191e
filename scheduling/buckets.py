"""Token buckets: a capacity that refills continuously at ``rate_per_s``, never above capacity."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TokenBucket:
    """``level`` starts full; ``try_take`` takes ``amount`` only if it is all there.

    Time is passed in; a ``now`` earlier than the last one (a clock step back) refills nothing.
    """

    capacity: float
    rate_per_s: float
    level: float = -1.0
    updated_s: float | None = None

    def __post_init__(self) -> None:
        if self.capacity <= 0 or self.rate_per_s <= 0:
            raise ValueError("a bucket needs capacity > 0 and rate_per_s > 0")
        if self.level < 0:
            self.level = self.capacity

    def refill(self, now: float) -> None:
        if self.updated_s is not None and now > self.updated_s:
            self.level = min(self.capacity, self.level + (now - self.updated_s) * self.rate_per_s)
        if self.updated_s is None or now > self.updated_s:
            self.updated_s = now

    def available(self, now: float) -> float:
        self.refill(now)
        return self.level

    def wait_s(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` is available (infinite when it exceeds the capacity)."""
        if amount > self.capacity:
            return float("inf")
        return max(0.0, (amount - self.available(now)) / self.rate_per_s)

    def try_take(self, amount: float, now: float) -> bool:
        if self.available(now) < amount:
            return False
        self.level -= amount
        return True

    def give_back(self, amount: float, now: float) -> None:
        """Return an amount that was taken but not used (never above capacity)."""
        self.refill(now)
        self.level = min(self.capacity, self.level + amount)
