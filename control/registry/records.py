"""What the registry returns: frozen dataclasses, never ORM objects.

Times are seconds since the epoch (``float``) as read from the registry's injected clock. Weights
are percentages of traffic per version number; they are validated when a record is built, so a
record that exists is well formed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from control.registry.errors import RegistryValidationError

STICKY_MODES = ("request", "tenant", "user")
ROLLOUT_KINDS = ("canary", "ab")
WEIGHT_SUM_PERCENT = 100.0
WEIGHT_TOLERANCE = 1e-6


class VersionState(StrEnum):
    """Lifecycle of a model version: registered -> verified (integrity checked) -> ready (loadable)."""

    REGISTERED = "registered"
    VERIFIED = "verified"
    READY = "ready"
    RETIRED = "retired"
    FAILED = "failed"


class RolloutStatus(StrEnum):
    """A rollout is active while running or paused; the other three are final."""

    RUNNING = "running"
    PAUSED = "paused"
    PROMOTED = "promoted"
    ROLLED_BACK = "rolled_back"
    ABORTED = "aborted"

    @property
    def active(self) -> bool:
        return self in (RolloutStatus.RUNNING, RolloutStatus.PAUSED)


ACTIVE_ROLLOUT_STATUSES = (RolloutStatus.RUNNING, RolloutStatus.PAUSED)


def validate_weights(weights: Mapping[int, float]) -> dict[int, float]:
    """Return ``weights`` as a new ``{version: percent}`` dict, or raise RegistryValidationError.

    At least one version; versions are positive ints; percents are finite, non-negative and add up
    to 100 within 1e-6 (a version may carry 0, e.g. a canary that has not started taking traffic).
    """
    if not weights:
        raise RegistryValidationError("weights must name at least one version")
    checked: dict[int, float] = {}
    for version, percent in weights.items():
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RegistryValidationError(f"weights: version {version!r} is not a positive integer")
        if isinstance(percent, bool) or not isinstance(percent, int | float) or not math.isfinite(percent):
            raise RegistryValidationError(f"weights: version {version} has a non-numeric weight {percent!r}")
        if percent < 0:
            raise RegistryValidationError(f"weights: version {version} has a negative weight {percent}")
        checked[version] = float(percent)
    total = math.fsum(checked.values())
    if abs(total - WEIGHT_SUM_PERCENT) > WEIGHT_TOLERANCE:
        raise RegistryValidationError(f"weights must add up to 100 percent, got {total!r}: {checked}")
    return checked


def validate_sticky(sticky: str) -> str:
    """Return ``sticky`` if it is one of ``STICKY_MODES``, else raise RegistryValidationError."""
    if sticky not in STICKY_MODES:
        raise RegistryValidationError(f"sticky must be one of {', '.join(STICKY_MODES)}, got {sticky!r}")
    return sticky


def _require_text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise RegistryValidationError(f"{name} must be a non-empty string, got {value!r}")


@dataclass(frozen=True, slots=True)
class RuntimeRequirements:
    """What a version needs to run: Triton backend, workload kind, GPUs it fits on."""

    backend: str
    kind: str
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_gb: float = 0.0
    quantization: str | None = None
    max_context_tokens: int | None = None

    def __post_init__(self) -> None:
        _require_text("requirements.backend", self.backend)
        _require_text("requirements.kind", self.kind)
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        if not math.isfinite(self.min_gpu_memory_gb) or self.min_gpu_memory_gb < 0:
            raise RegistryValidationError(f"requirements.min_gpu_memory_gb must be >= 0, got {self.min_gpu_memory_gb}")
        if self.max_context_tokens is not None and self.max_context_tokens < 1:
            raise RegistryValidationError(
                f"requirements.max_context_tokens must be >= 1, got {self.max_context_tokens}"
            )


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One registered version of a model and where its artifact lives."""

    model: str
    version: int
    artifact_uri: str
    manifest_digest: str
    signer_key_id: str
    requirements: RuntimeRequirements
    state: VersionState
    created_at: float
    created_by: str


@dataclass(frozen=True, slots=True)
class AliasRecord:
    """How a model name routes: ``weights`` maps version -> percent of traffic (adds up to 100).

    ``sticky`` says what keeps a caller on one version ("request": nothing, "tenant": the tenant);
    ``generation`` grows by one with every change of this alias.
    """

    model: str
    weights: dict[int, float]
    sticky: str
    generation: int
    updated_at: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", validate_weights(self.weights))
        validate_sticky(self.sticky)


@dataclass(frozen=True, slots=True)
class DeploymentRecord:
    """Where a model runs: the worker pools, Triton instances and replicas kept warm."""

    model: str
    pools: tuple[str, ...]
    instances: int
    min_warm_replicas: int
    updated_at: float


@dataclass(frozen=True, slots=True)
class RolloutRecord:
    """A canary or A/B rollout; ``variants`` are the alias weights it set most recently."""

    id: int
    model: str
    kind: str
    baseline_version: int | None
    variants: dict[int, float]
    sticky: str
    status: RolloutStatus
    thresholds: dict[str, float]
    started_at: float
    updated_at: float
    started_by: str

    def __post_init__(self) -> None:
        if self.kind not in ROLLOUT_KINDS:
            raise RegistryValidationError(f"rollout kind must be one of {', '.join(ROLLOUT_KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "variants", validate_weights(self.variants))
        validate_sticky(self.sticky)
        object.__setattr__(self, "thresholds", validate_thresholds(self.thresholds))


def validate_thresholds(thresholds: Mapping[str, float]) -> dict[str, float]:
    """Return ``thresholds`` as a new ``{name: finite number}`` dict, or raise RegistryValidationError."""
    checked: dict[str, float] = {}
    for name, value in thresholds.items():
        _require_text("threshold name", name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise RegistryValidationError(f"threshold {name!r} must be a finite number, got {value!r}")
        checked[name] = float(value)
    return checked


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One append-only audit entry. ``subject`` is the model name for model-scoped changes;
    ``details`` is the JSON stored with it (so any version-keyed dict in it has string keys)."""

    id: int
    at: float
    actor: str
    action: str
    subject: str
    reason: str
    details: dict[str, object]
