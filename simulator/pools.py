"""Pools of simulated workers: a mix of GPU types (``{"h100": 16}``) becomes worker specs with the
views the scheduler sees, and the per-model limits with the shipped tier shares.

Each GPU type's LLM engine gets its own step token budget, chosen for the tightest TPOT objective
of the tiers (``perf.gpu.tpot_step_budget``): a small GPU prefills in smaller chunks so that the
sequences decoding beside a prefill keep their time per output token; a fast one keeps vLLM's
2,048. This is an engine setting shipped per pool (``max_num_batched_tokens``); the profile's
prefill speed follows it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduling.capacity import CapacityProfile
from scheduling.requests import RequestKind
from scheduling.workers import ModelLimits, WorkerView
from simulator.driver import WorkerSpec
from simulator.perf.gpu import BatchedPerf, LlmPerf, diffusion_perf, resnet50_perf, tpot_step_budget
from simulator.perf.hardware import GPUS, MODELS, GpuSpec
from simulator.tenancy import MIN_PREFILL_LINE_TOKENS, MODEL, PREFILL_LINE_S, SLOS, TIER_SHARE

DEFAULT_MODEL = "llama-3-8b"


def parse_mix(text: str) -> dict[str, int]:
    """``"h100:8,a10:4"`` → ``{"h100": 8, "a10": 4}`` (validated against the known GPU types)."""
    mix: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition(":")
        if name not in GPUS:
            raise ValueError(f"unknown GPU type {name!r}; known: {', '.join(GPUS)}")
        mix[name] = mix.get(name, 0) + int(count or 1)
    if not mix or min(mix.values()) < 0 or sum(mix.values()) == 0:
        raise ValueError(f"empty pool {text!r}")
    return mix


def mix_label(mix: Mapping[str, int]) -> str:
    return ",".join(f"{gpu}:{count}" for gpu, count in mix.items() if count)


def mix_cost_per_hour(mix: Mapping[str, int]) -> float:
    return sum(GPUS[gpu].cost_per_hour * count for gpu, count in mix.items())


def build_pool(mix: Mapping[str, int], model: str = DEFAULT_MODEL, lazy_timeouts: bool = False,
               cold_start: bool = False) -> list[WorkerSpec]:
    """One worker per GPU, ids ``<gpu>-<nn>``; with ``cold_start`` each is ready after its load time.

    A GPU whose memory cannot hold the weights gets no worker (its pool is empty)."""
    specs: list[WorkerSpec] = []
    for gpu, count in mix.items():
        perf = llm_perf(gpu, model)
        if perf.kv_pool_tokens <= 0:
            continue
        profile = perf.profile()
        for index in range(count):
            view = WorkerView(f"{gpu}-{index:02d}", gpu, "r1", profile, {MODEL: frozenset({1})},
                              kv_total_tokens=perf.kv_pool_tokens)
            specs.append(WorkerSpec(perf, view, perf.cold_start_s() if cold_start else 0.0, lazy_timeouts))
    return specs


def llm_perf(gpu: str, model: str = DEFAULT_MODEL) -> LlmPerf:
    """The engine of ``model`` on one ``gpu``, with the step token budget for the tightest TPOT objective."""
    tightest_tpot_s = min(slo.tpot_s for slo in SLOS.values())
    budget = tpot_step_budget(GPUS[gpu], MODELS[model], tightest_tpot_s)
    return LlmPerf(GPUS[gpu], MODELS[model], step_token_budget=budget)


def model_limits() -> dict[str, ModelLimits]:
    return {MODEL: ModelLimits(MODEL, RequestKind.LLM, tier_share=dict(TIER_SHARE),
                              max_prefill_line_s=PREFILL_LINE_S, min_prefill_line_tokens=MIN_PREFILL_LINE_TOKENS,
                              kv_on_demand=True)}


VISION_MODEL = "resnet50"
VISION_MAX_BATCH = 64  # Triton max_batch_size for the image model (assumption)


def build_vision_pool(mix: Mapping[str, int], lazy_timeouts: bool = False) -> list[WorkerSpec]:
    """Workers serving only ResNet-50 (MLPerf-calibrated batched model), ids ``<gpu>-v<nn>``."""
    return _single_model_pool(mix, VISION_MODEL, resnet50_perf, "v", VISION_MAX_BATCH, lazy_timeouts)


def _single_model_pool(mix: Mapping[str, int], model: str, perf_of: Callable[[GpuSpec], BatchedPerf], suffix: str,
                       max_batch_rows: int, lazy_timeouts: bool) -> list[WorkerSpec]:
    """Workers of a rows-counted model (``perf_of(gpu)`` gives their speed), ids ``<gpu>-<suffix><nn>``."""
    specs: list[WorkerSpec] = []
    for gpu, count in mix.items():
        perf = perf_of(GPUS[gpu])
        profile = CapacityProfile(gpu, GPUS[gpu].memory_gib, max_batch_tokens=1, max_context_tokens=1,
                                  prefill_tokens_per_s=perf.peak_rows_per_s, decode_tokens_per_s=perf.peak_rows_per_s,
                                  cost_per_hour=GPUS[gpu].cost_per_hour)
        for index in range(count):
            view = WorkerView(f"{gpu}-{suffix}{index:02d}", gpu, "r1", profile, {model: frozenset({1})})
            specs.append(WorkerSpec(perf, view, 0.0, lazy_timeouts, max_batch_rows))
    return specs


def vision_limits() -> dict[str, ModelLimits]:
    return {VISION_MODEL: ModelLimits(VISION_MODEL, RequestKind.BATCHED, max_batch_size=VISION_MAX_BATCH,
                                      tier_share=dict(TIER_SHARE))}


DIFFUSION_MODEL = "diffusion"


def build_diffusion_pool(mix: Mapping[str, int], lazy_timeouts: bool = False) -> list[WorkerSpec]:
    """Workers serving a Stable Diffusion model one request at a time, ids ``<gpu>-d<nn>``."""
    return _single_model_pool(mix, DIFFUSION_MODEL, diffusion_perf, "d", 1, lazy_timeouts)


def diffusion_limits() -> dict[str, ModelLimits]:
    """One request in flight per worker (a batch of one, ``rows_per_instance`` 1)."""
    return {DIFFUSION_MODEL: ModelLimits(DIFFUSION_MODEL, RequestKind.BATCHED, max_batch_size=1,
                                         rows_per_instance=1, tier_share=dict(TIER_SHARE))}
