"""Which version of a model serves a request: weighted, deterministic traffic splitting.

A ``TrafficSplit`` is an alias's live versions and their weights in percent (summing to 100), plus
what the split is sticky to. ``choose(request_id, tenant, user)`` hashes the sticky key (the request
id; the tenant name for A/B tests that must show each tenant one variant; or the end user the
client names, for A/B tests across one tenant's users, falling back to the tenant when a request
names none) with SHA-256 into a
point in [0, 100) and walks the versions in ascending order, so the same key always lands on
the same version for the same weights, and moving weight from one version to another moves only
the keys in the slice that changed hands. The observed share over many distinct keys converges
to the weights (a uniform hash), which the canary's ±3-point check relies on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

_WEIGHT_TOLERANCE = 1e-6
_HASH_SPACE = float(1 << 64)


class StickyTo(StrEnum):
    REQUEST = "request"
    TENANT = "tenant"
    USER = "user"


@dataclass(frozen=True)
class TrafficSplit:
    """Live versions -> weight in percent; a version with weight 0 is live (loaded) but gets no
    new traffic, as during a drain or a paused canary."""

    model: str
    weights: Mapping[int, float]
    sticky: StickyTo = StickyTo.REQUEST
    generation: int = 0
    _cumulative: tuple[tuple[float, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError(f"model {self.model}: a traffic split needs at least one version")
        if any(w < 0 for w in self.weights.values()):
            raise ValueError(f"model {self.model}: weights must be non-negative")
        total = sum(self.weights.values())
        if abs(total - 100.0) > _WEIGHT_TOLERANCE:
            raise ValueError(f"model {self.model}: weights must sum to 100, not {total}")
        running, cumulative = 0.0, []
        for version in sorted(self.weights):
            running += self.weights[version]
            if self.weights[version] > 0:
                cumulative.append((running, version))
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @property
    def versions(self) -> frozenset[int]:
        """Every live version, including those at weight 0."""
        return frozenset(self.weights)

    def choose(self, request_id: str, tenant: str, user: str | None = None) -> int:
        """The version that serves this request."""
        if len(self._cumulative) == 1:
            return self._cumulative[0][1]
        match self.sticky:
            case StickyTo.TENANT:
                key = tenant
            case StickyTo.USER:
                key = f"{tenant}\x00{user}" if user else tenant
            case _:
                key = request_id
        point = split_point(f"{self.model}\x00{key}")
        for bound, version in self._cumulative:
            if point < bound:
                return version
        return self._cumulative[-1][1]


def split_point(key: str) -> float:
    """A uniform point in [0, 100) from the first 8 bytes of SHA-256 of ``key``."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _HASH_SPACE * 100.0
