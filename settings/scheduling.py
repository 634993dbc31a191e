"""``scheduling.yaml``: the gateway's policy, SLOs per tier, shedding and capacity profiles, read
once at the edge into the pure core's types (``scheduling.*``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictBool, ValidationError

from scheduling.admission import AdmissionConfig
from scheduling.capacity import CapacityProfile
from scheduling.requests import RequestKind
from scheduling.scheduler import Policy, SchedulerConfig
from scheduling.slo import Slo
from scheduling.tenants import Tier
from scheduling.workers import ModelLimits
from settings.base import ConfigError, StrictModel, read_yaml
from settings.engine import engine_reuses_prefixes
from settings.stack import ModelSpec, StackConfig, WorkloadKind

Positive = Annotated[float, Field(gt=0)]


class _SloEntry(StrictModel):
    """Per tier: time to first token (or to the result), time per output token, queue deadline."""

    ttft_s: Positive
    tpot_s: Positive
    deadline_s: Positive


class _Profile(StrictModel):
    memory_gib: Positive
    max_batch_tokens: Annotated[int, Field(gt=0)]
    max_context_tokens: Annotated[int, Field(gt=0)]
    prefill_tokens_per_s: Positive
    decode_tokens_per_s: Positive
    cost_per_hour: Annotated[float, Field(ge=0)]
    max_sequences: Annotated[int, Field(gt=0)] = 256
    decode_step_s: Positive | None = None  # batch-1 decode iteration (s); with kv_read_s_per_token, the cost model
    kv_read_s_per_token: Annotated[float, Field(ge=0)] = 0.0
    models: tuple[str, ...] = ()
    quantizations: tuple[str, ...] = ()


class SchedulingFile(StrictModel):
    policy: Policy = Policy.FAIR
    max_queued: Annotated[int, Field(ge=1, le=1_000_000)] = 4096
    rows_per_instance: Annotated[int, Field(ge=1, le=64)] = 2
    tier_budget_share: dict[Tier, Annotated[float, Field(gt=0, le=1)]] = Field(default_factory=dict)
    min_dispatch_share: dict[Tier, Annotated[float, Field(ge=0, le=0.5)]] = Field(default_factory=dict)
    slo: dict[Tier, _SloEntry]
    shed_wait_s: dict[Tier, Positive | None] = Field(default_factory=dict)
    max_prefill_line_s: Positive | None = None
    min_prefill_line_tokens: Annotated[int, Field(ge=0)] = 0
    expire_at_ttft: StrictBool = True  # expire a queued request once it cannot meet its ttft_s (fair policy)
    kv_on_demand: StrictBool = False  # LLM engines allocate KV as sequences grow and preempt: claim held KV
    capacity_profiles: dict[str, _Profile]


@dataclass(frozen=True)
class SchedulingSettings:
    """Everything the gateway needs to build and drive the scheduler."""

    scheduler: SchedulerConfig
    slo: dict[Tier, Slo]
    profiles: dict[str, CapacityProfile]
    limits: dict[str, ModelLimits]

    def profile_of(self, profile_name: str) -> CapacityProfile:
        return self.profiles[profile_name]


def _reuses_prefixes(model: ModelSpec, stack: StackConfig) -> bool:
    """Whether ``model`` is an LLM whose engine reuses cached prompt prefixes on every pool that
    serves it (``settings.engine.engine_reuses_prefixes``; ConfigError on a bad engine parameter)."""
    if model.kind is not WorkloadKind.LLM:
        return False
    return all(engine_reuses_prefixes(model, pool.gpu_type) for pool in stack.pools if model.name in pool.models)


def _limits(stack: StackConfig, parsed: SchedulingFile) -> dict[str, ModelLimits]:
    return {
        m.name: ModelLimits(m.name, RequestKind.LLM if m.kind is WorkloadKind.LLM else RequestKind.BATCHED,
                            max_batch_size=m.batching.max_batch_size, instances=m.instances,
                            rows_per_instance=parsed.rows_per_instance,
                            tier_share=dict(parsed.tier_budget_share),
                            max_prefill_line_s=parsed.max_prefill_line_s if m.kind is WorkloadKind.LLM else None,
                            min_prefill_line_tokens=parsed.min_prefill_line_tokens,
                            kv_on_demand=parsed.kv_on_demand and m.kind is WorkloadKind.LLM,
                            prefix_reuse=_reuses_prefixes(m, stack))
        for m in stack.models
    }


def load_scheduling(path: Path, stack: StackConfig, policy: Policy | None = None) -> SchedulingSettings:
    """Read and validate ``scheduling.yaml`` against the stack (every tier has an SLO, every pool's
    profile exists); ``policy`` (a CLI flag) overrides the file's."""
    raw = read_yaml(path)
    try:
        parsed = SchedulingFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    missing = [t.value for t in Tier if t not in parsed.slo]
    if missing:
        raise ConfigError(f"{path}: slo has no entry for tiers {missing}")
    profiles = {name: CapacityProfile(name, **p.model_dump(exclude={"models", "quantizations"}),
                                      models=frozenset(p.models), quantizations=frozenset(p.quantizations))
                for name, p in parsed.capacity_profiles.items()}
    for pool in stack.pools:
        if pool.profile_name not in profiles:
            raise ConfigError(f"{path}: pool {pool.name} uses profile '{pool.profile_name}', which is not defined")
    shed = {tier: parsed.shed_wait_s.get(tier) for tier in Tier}
    if sum(parsed.min_dispatch_share.values()) >= 1.0:
        raise ConfigError(f"{path}: min_dispatch_share: the shares add up to 1 or more; they must leave room")
    config = SchedulerConfig(policy=policy or parsed.policy, max_queued=parsed.max_queued,
                             admission=AdmissionConfig(shed_wait_s=shed), expire_at_ttft=parsed.expire_at_ttft,
                             min_share=dict(parsed.min_dispatch_share))
    slo = {tier: Slo(**entry.model_dump()) for tier, entry in parsed.slo.items()}
    return SchedulingSettings(config, slo, profiles, _limits(stack, parsed))
