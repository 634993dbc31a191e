"""The GPU model, from published figures: how long one engine iteration, one non-LLM batch, one
cold start take on a GPU.

An LLM iteration processes ``tokens`` new tokens (prefill chunks plus one per decoding sequence)
over ``kv_tokens`` cached tokens. Its linear layers are compute-bound for many tokens
(2 x params FLOPs per token at the compute efficiency of peak) and bandwidth-bound for few (weights
plus the KV cache read at the bandwidth efficiency of peak); the two are blended as
``(compute^p + memory^p)^(1/p)`` (``hardware.Efficiency``, p = 1.86), which reproduces the knee of
Vidur's measured profiles (calibration §2.4) better than ``max``. Prefill attention adds its
quadratic FLOPs; every iteration adds ``STEP_OVERHEAD_S``. Nothing here branches on a GPU's
name: the GPU and model are data.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.capacity import CapacityProfile
from simulator.perf.hardware import (
    BOOT_S,
    EFFICIENCY,
    GIB,
    GPU_MEMORY_UTILISATION,
    KV_BLOCK_TOKENS,
    STEP_OVERHEAD_S,
    WEIGHT_LOAD_BYTES_PER_S,
    Efficiency,
    GpuSpec,
    LlmArchitecture,
)
from simulator.perf.protocol import EngineLimits, IterationWork

MAX_SEQUENCES = 256  # vLLM's default max_num_seqs
STEP_TOKEN_BUDGET = 2048  # tokens per iteration (Sarathi-style chunked prefill budget; vLLM's default)
STEP_BUDGET_GRAIN = 256  # step budgets are chosen in multiples of this many tokens
MIN_STEP_TOKEN_BUDGET = 512  # below this, prefill re-reads the weights too often (and decoders crowd it out)
TPOT_ITERATION_SHARE = 0.8  # a full-chunk iteration may take this share of the TPOT objective (rest: KV reads)
ATTENTION_LAYERS_HIDDEN = 32 * 4096  # layers x hidden of the 7B/8B models (both 32 x 4,096)


@dataclass(frozen=True)
class LlmPerf:
    """The timing model of one (GPU, model) pair."""

    gpu: GpuSpec
    model: LlmArchitecture
    step_overhead_s: float = STEP_OVERHEAD_S
    step_token_budget: int = STEP_TOKEN_BUDGET  # the engine's max tokens per iteration (max_num_batched_tokens)
    efficiency: Efficiency = EFFICIENCY

    def __post_init__(self) -> None:
        if self.step_token_budget <= 0:
            raise ValueError(f"step_token_budget must be > 0, got {self.step_token_budget}")

    @property
    def kv_pool_tokens(self) -> int:
        """KV tokens that fit: GPU memory x utilisation minus weights, in whole blocks (0 if none)."""
        free = self.gpu.memory_gib * GIB * GPU_MEMORY_UTILISATION - self.model.weight_bytes
        blocks = int(max(0.0, free) // (self.model.kv_bytes_per_token * KV_BLOCK_TOKENS))
        return blocks * KV_BLOCK_TOKENS

    @property
    def limits(self) -> EngineLimits:
        """A vLLM-style engine: 256 sequences, this GPU's tokens per iteration (prompt chunks too)."""
        return EngineLimits(MAX_SEQUENCES, self.step_token_budget, self.step_token_budget, self.kv_pool_tokens,
                            KV_BLOCK_TOKENS)

    def iteration_s(self, work: IterationWork) -> float:
        """``step_s`` of the iteration (``LlmPerfModel``)."""
        return self.step_s(work.prefill_tokens, work.decode_seqs, work.kv_tokens, work.prefill_context)

    def linear_s(self, tokens: int, kv_tokens: int = 0) -> float:
        """Linear layers of the blocks (plus the KV read) of one iteration of ``tokens`` new tokens."""
        compute = 2.0 * self.model.block_params * tokens / self._flops_per_s
        bytes_read = 2.0 * self.model.block_params + self.model.kv_bytes_per_token * kv_tokens
        memory = bytes_read / self._bytes_per_s
        p = self.efficiency.blend_exponent
        return float((compute**p + memory**p) ** (1.0 / p))

    @property
    def _flops_per_s(self) -> float:
        return self.gpu.fp16_tflops * 1e12 * self.efficiency.compute

    @property
    def _bytes_per_s(self) -> float:
        return self.gpu.bandwidth_gb_s * 1e9 * self.efficiency.bandwidth

    def step_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens: int, prefill_context: int = 0) -> float:
        """One iteration: ``prefill_tokens`` of prompt (whose attention spans ``prefill_context``
        tokens each on average), ``decode_seqs`` decoding sequences, ``kv_tokens`` cached tokens."""
        attention = 4.0 * ATTENTION_LAYERS_HIDDEN * prefill_tokens * max(prefill_context, prefill_tokens) / 2
        attention_s = attention / self._flops_per_s
        head_bytes = self.model.params - self.model.block_params  # the LM head, half the rest, FP16
        head_s = head_bytes / self._bytes_per_s
        linear_s = self.linear_s(prefill_tokens + decode_seqs, kv_tokens)
        return linear_s + attention_s + head_s + self.step_overhead_s

    def prefill_s(self, prompt_tokens: int) -> float:
        """Batch-1 time to first token for a prompt (chunked at the step budget)."""
        total, done = 0.0, 0
        while done < prompt_tokens:
            chunk = min(self.step_token_budget, prompt_tokens - done)
            total += self.step_s(chunk, 0, done, done + chunk)
            done += chunk
        return total

    def cold_start_s(self) -> float:
        """Scale from zero: engine boot plus reading the weights onto the GPU."""
        return BOOT_S + self.model.weight_bytes / WEIGHT_LOAD_BYTES_PER_S

    def profile(self) -> CapacityProfile:
        """The capacity profile the scheduler is told (its priors; it learns the real rate online).

        Prefill speed: a full chunk of the step token budget; decode speed: units (prompt + output tokens) per
        second of a worker decoding its typical batch (prompts ≈ 1k tokens, as in the Azure traces).
        Decode model: a batch-1 decode iteration (weights, LM head, overhead) plus the KV read per
        cached token, at the bandwidth efficiency.
        """
        kv = self.kv_pool_tokens
        seqs = max(1, min(MAX_SEQUENCES, kv // 1280))
        decode_step = self.step_s(0, seqs, seqs * 1152)
        units_per_s = seqs * 1280 / (256 * decode_step + 1024 * seqs / self.prefill_rate())
        return CapacityProfile(
            gpu_type=self.gpu.name, memory_gib=self.gpu.memory_gib, max_batch_tokens=max(1, kv),
            max_context_tokens=self.model.max_context_tokens, prefill_tokens_per_s=self.prefill_rate(),
            decode_tokens_per_s=units_per_s, cost_per_hour=self.gpu.cost_per_hour,
            max_sequences=MAX_SEQUENCES, decode_step_s=self.step_s(0, 1, 0),
            kv_read_s_per_token=self.model.kv_bytes_per_token / self._bytes_per_s)

    def prefill_rate(self) -> float:
        """Prompt tokens per second of an engine prefilling full chunks (its step token budget)."""
        chunk = self.step_token_budget
        return chunk / self.step_s(chunk, 0, 0, chunk)


def tpot_step_budget(gpu: GpuSpec, model: LlmArchitecture, tpot_s: float,
                     largest: int = STEP_TOKEN_BUDGET) -> int:
    """The engine's step token budget for a TPOT objective (Sarathi-Serve's rule): the largest
    multiple of ``STEP_BUDGET_GRAIN``, at most ``largest``, whose iteration carrying a full prompt
    chunk takes at most ``TPOT_ITERATION_SHARE`` of ``tpot_s``, so that sequences decoding beside a
    prefill keep their objective; never below ``MIN_STEP_TOKEN_BUDGET`` (a GPU too slow for the
    objective even then gets that floor)."""
    perf = LlmPerf(gpu, model)
    budget = MIN_STEP_TOKEN_BUDGET
    for candidate in range(MIN_STEP_TOKEN_BUDGET, largest + 1, STEP_BUDGET_GRAIN):
        if perf.step_s(candidate, 0, 0, candidate) <= TPOT_ITERATION_SHARE * tpot_s:
            budget = candidate
    return budget


@dataclass(frozen=True)
class BatchedPerf:
    """A non-LLM model on one GPU: a batch of ``b`` rows takes ``latency_1_s + b / peak_rows_per_s``.

    ``peak_rows_per_s`` is the MLPerf offline throughput (calibration §3); ``latency_1_s`` the
    batch-1 latency (ResNet-50 TensorRT INT8 on A100: 0.46 ms, §3), scaled by peak throughput for
    other GPUs (assumption).
    """

    gpu: GpuSpec
    peak_rows_per_s: float
    latency_1_s: float

    def batch_s(self, rows: int) -> float:
        return self.latency_1_s + rows / self.peak_rows_per_s


def resnet50_perf(gpu: GpuSpec) -> BatchedPerf:
    a100_rate = 42_379.3  # MLPerf v3.0 A100 offline (calibration §3)
    return BatchedPerf(gpu, gpu.resnet50_per_s, 0.00046 * a100_rate / gpu.resnet50_per_s)


# Stable Diffusion: the Alibaba trace's median is 0.767 s per denoising step and image (its
# exec_time_seconds over num_inference_steps x num_images_per_prompt; derived, GPU type not stated).
# Assumption: that GPU is A100-class (312 TFLOPS); other types scale with dense FP16 TFLOPS.
SD_SECONDS_PER_STEP_A100 = 0.767


def diffusion_perf(gpu: GpuSpec) -> BatchedPerf:
    """One request at a time (rows = steps x images): ``batch_s(steps)`` is its execution time."""
    steps_per_s = gpu.fp16_tflops / 312.0 / SD_SECONDS_PER_STEP_A100
    return BatchedPerf(gpu, steps_per_s, 0.0)
