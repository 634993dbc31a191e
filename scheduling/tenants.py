"""Tenants: who sends traffic, at which tier, with which weight, quotas and allowed regions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Tier(StrEnum):
    """Service tiers in shedding order: batch is shed first, premium last."""

    PREMIUM = "premium"
    STANDARD = "standard"
    BATCH = "batch"

    @property
    def triton_priority(self) -> int:
        """Triton priority level (1 is served first) for a model with three levels."""
        return {Tier.PREMIUM: 1, Tier.STANDARD: 2, Tier.BATCH: 3}[self]


@dataclass(frozen=True)
class Quotas:
    """Per-tenant limits; ``None`` means unlimited."""

    tokens_per_minute: int | None = None
    requests_per_second: float | None = None
    max_concurrent: int | None = None


@dataclass(frozen=True)
class Tenant:
    name: str
    tier: Tier
    weight: float = 1.0
    quotas: Quotas = field(default_factory=Quotas)
    allowed_regions: frozenset[str] = frozenset()
    allowed_models: frozenset[str] = frozenset()

    def may_use_model(self, model: str) -> bool:
        """True when the tenant has no model allow-list or ``model`` is on it."""
        return not self.allowed_models or model in self.allowed_models
