"""Small builders for scheduling tests (pure objects, no I/O)."""

from __future__ import annotations

from itertools import count

from scheduling.capacity import CapacityProfile
from scheduling.requests import Request, RequestKind
from scheduling.tenants import Quotas, Tenant, Tier
from scheduling.workers import ModelLimits, WorkerView

_ids = count()

BIG = CapacityProfile("big", memory_gib=80, max_batch_tokens=8192, max_context_tokens=4096,
                      prefill_tokens_per_s=4000, decode_tokens_per_s=200, cost_per_hour=4.0)
SMALL = CapacityProfile("small", memory_gib=24, max_batch_tokens=2048, max_context_tokens=1024,
                        prefill_tokens_per_s=2000, decode_tokens_per_s=100, cost_per_hour=1.0)
LIMITS = {"chat": ModelLimits("chat", RequestKind.LLM),
          "embed": ModelLimits("embed", RequestKind.BATCHED, max_batch_size=8, instances=1, rows_per_instance=2)}


def tenant(name: str = "t", tier: Tier = Tier.STANDARD, weight: float = 1.0, regions: tuple[str, ...] = (),
           **quotas: float) -> Tenant:
    return Tenant(name, tier, weight, Quotas(**quotas),  # type: ignore[arg-type]
                  allowed_regions=frozenset(regions))


def request(who: Tenant, now: float = 0.0, model: str = "chat", prefill: int = 10, output: int = 10,
            rows: int = 1, deadline_in_s: float = 60.0, slo_s: float | None = None) -> Request:
    kind = LIMITS[model].kind if model in LIMITS else RequestKind.BATCHED
    return Request(f"r{next(_ids)}", who, model, kind, arrival_s=now, deadline_s=now + deadline_in_s,
                   prefill_tokens=prefill, max_output_tokens=output if kind is RequestKind.LLM else 0,
                   rows=rows, ttft_slo_s=slo_s)


def view(worker_id: str, profile: CapacityProfile = BIG, region: str = "eu", pool: str | None = None,
         models: tuple[str, ...] = ("chat", "embed"), healthy: bool = True) -> WorkerView:
    return WorkerView(worker_id, pool or f"pool-{profile.gpu_type}", region, profile,
                      {m: frozenset({1}) for m in models}, healthy)
