"""GPU types and served models: the constants of the performance model, each with its source.

"calibration §N" is section N of ``docs/calibration.md``, which gives each published figure with
its source (NVIDIA datasheets, MLPerf Inference results, TensorRT-LLM's performance tables, Vidur's
profiles, cloud price lists; none measured here). ``derived`` marks arithmetic on a cited figure,
``assumption`` a value no source gave.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: memory (GiB), HBM/GDDR bandwidth (GB/s), dense FP16 tensor TFLOPS, $ per GPU-hour."""

    name: str
    memory_gib: float
    bandwidth_gb_s: float
    fp16_tflops: float
    cost_per_hour: float
    resnet50_per_s: float  # MLPerf offline images/s, one GPU (calibration §3)
    bert_per_s: float  # MLPerf offline bert-99 sequences/s, one GPU (calibration §3)


GPUS: dict[str, GpuSpec] = {
    # A10: 24 GB, 600 GB/s, 125 TFLOPS dense (calibration §1, NVIDIA A10 datasheet);
    # $1.006/h AWS g5.xlarge on-demand (§5); MLPerf v1.1 8xA10 / 8 (§3, derived).
    "a10": GpuSpec("a10", 24, 600, 125, 1.006, 13_775, 1_094.7),
    # A100 40GB SXM: 1,555 GB/s, 312 TFLOPS (§1); ≈ $4.10/GPU-h, p4d.24xlarge / 8 (§5);
    # MLPerf figures of the 80 GB part (§3; no 40 GB submission was read: assumption).
    "a100-40": GpuSpec("a100-40", 40, 1555, 312, 4.10, 42_379.3, 3_590.46),
    # A100 80GB SXM: 2,039 GB/s (§1, LLM-Prof), 312 TFLOPS; $3.67/GPU-h (§5, Mélange inputs);
    # MLPerf v3.0 DGX A100 x1 (§3).
    "a100-80": GpuSpec("a100-80", 80, 2039, 312, 3.67, 42_379.3, 3_590.46),
    # H100 SXM: 80 GB, 3,350 GB/s, 989 TFLOPS dense (§1); ≈ $12.29/GPU-h, p5.48xlarge list / 8 (§5,
    # flagged there as possibly stale); MLPerf v4.0 DGX H100 x1 (§3).
    "h100": GpuSpec("h100", 80, 3350, 989, 12.29, 88_714.3, 9_081.51),
    # H200 SXM: 141 GB, 4,800 GB/s, 989 TFLOPS (§1). No on-demand price in §5: derived as the H100
    # price x the capacity-block ratio H200/H100 = 5.408 / 4.916 (§5) = $13.52/h. No MLPerf figure:
    # the H100's is used (same die; assumption).
    "h200": GpuSpec("h200", 141, 4800, 989, 13.52, 88_714.3, 9_081.51),
}


@dataclass(frozen=True)
class LlmArchitecture:
    """A dense decoder served in FP16: all parameters and those of the transformer blocks (an
    iteration computes 2 x block params FLOPs per token and reads the block weights once; the LM
    head adds its weights' read), resident weight bytes, KV-cache bytes per token, longest context."""

    name: str
    params: float
    block_params: float
    weight_bytes: float
    kv_bytes_per_token: int
    max_context_tokens: int


MODELS: dict[str, LlmArchitecture] = {
    # Llama-2-7B: 6.74e9 params; the calibration's rule of thumb counts 6.7e9 (13.5 GB FP16) per
    # iteration, which is how the efficiencies below were derived; KV = 2 (K, V) x 32 layers x 4,096
    # hidden x 2 bytes = 512 KiB/token (derived, multi-head attention); context 4,096.
    "llama-2-7b": LlmArchitecture("llama-2-7b", 6.74e9, 6.7e9, 13.5e9, 2 * 32 * 4096 * 2, 4096),
    # Llama-3-8B: 8.03e9 params, 16.1 GB FP16, of which the embedding and the LM head are 128,256 x
    # 4,096 each, so the blocks hold 6.98e9 (derived from the published architecture); GQA with 8 KV
    # heads of 128 → 2 x 32 x 1,024 x 2 bytes = 128 KiB/token; context 8,192.
    "llama-3-8b": LlmArchitecture("llama-3-8b", 8.03e9, 6.98e9, 16.06e9, 2 * 32 * 1024 * 2, 8192),
}

# Share of GPU memory the engine may use (vLLM's default gpu_memory_utilization, 0.9: assumption
# that activations and CUDA context fit in the rest); weights come out of it, the KV pool is the rest.
GPU_MEMORY_UTILISATION = 0.9
KV_BLOCK_TOKENS = 16  # paged-attention block size (vLLM's default)


@dataclass(frozen=True)
class Efficiency:
    """How an iteration's linear layers reach the hardware: fractions of peak FP16 compute and of
    memory bandwidth, and the blend of the two bounds, ``(compute_s^p + memory_s^p)^(1/p)`` with
    ``p = blend_exponent`` (2 is ``hypot``; a large ``p`` tends to ``max``)."""

    compute: float
    bandwidth: float
    blend_exponent: float


# Rule of thumb (calibration §2.4, derived from Vidur's Llama-2-7B profile): decode reads weights at
# 13.5 GB / 9.3 ms = 1.45 TB/s of 2.04 on A100 (0.71) and 13.5 GB / 5.6 ms = 2.4 of 3.35 TB/s on
# H100 (0.72); prefill reaches 213 of 312 TFLOPS on A100 (0.68) and 657 of 989 on H100 (0.66); blend
# hypot. That start (0.66, 0.715, 2) left Vidur's H100 point at 256 tokens 16 % fast.
# Shipped: the least-squares fit, on relative error, to all 33 published points of
# ``simulator.perf.fidelity`` (``fit_efficiency``; ``shunter sim fidelity`` reports it), rounded.
EFFICIENCY = Efficiency(compute=0.676, bandwidth=0.704, blend_exponent=1.86)

# Per-iteration cost outside the linear layers (attention launch, LM head, sampling, scheduler):
# fitted so that batch-1 TTFT at ISL 128 on A100 is close to TRT-LLM v0.5's 16 ms (§2.1) given
# Vidur's 12.2 ms linear-layer time at 128 tokens (§2.4).
STEP_OVERHEAD_S = 0.002

# Cold start for scale-from-zero (assumption; no source in calibration.md): container and engine
# start, then weights read at a host-to-GPU rate.
BOOT_S = 20.0
WEIGHT_LOAD_BYTES_PER_S = 2.0e9
