"""Fidelity of the LLM worker model against the published points it was calibrated on
(``docs/calibration.md``, whose section numbers the sources below cite): each point is (what,
source, published value, modelled value).

- Vidur's per-iteration linear-layer times (section 2.4; no attention, LM head or overhead), for
  Llama-2-7B on A100 80GB and H100 and Llama-3-8B on A100 80GB, compared with ``linear_s``.
- TensorRT-LLM v0.5 batch-1 TTFT of LLaMA-7B FP16 on A100 at ISL 128 and 2,048 (section 2.1),
  compared with ``prefill_s`` plus one decode step's overhead.
- TensorRT-LLM v0.6.1 A100 FP16 LLaMA-7B max throughput at ISL/OSL 128/128, batch 384 (section 2.1):
  static batching, modelled as the batch's chunked prefill then 128 decode iterations.

``fit_efficiency()`` finds the ``hardware.Efficiency`` (compute and bandwidth fractions of peak,
blend exponent) that minimises the squared relative error over all these points; the shipped
``EFFICIENCY`` is that fit, rounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares

from simulator.perf.gpu import STEP_TOKEN_BUDGET, LlmPerf
from simulator.perf.hardware import EFFICIENCY, GPUS, MODELS, Efficiency

TOLERANCE = 0.15
VIDUR_TOKENS = (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096)
VIDUR_MS = {
    ("a100-80", "llama-2-7b"): (9.28, 9.06, 9.54, 9.70, 12.24, 17.81, 33.36, 67.94, 133.42, 258.38),
    ("a100-80", "llama-3-8b"): (9.70, 9.98, 10.91, 11.23, 13.18, 19.49, 34.64, 75.14, 145.57, 273.57),
    ("h100", "llama-2-7b"): (5.60, 5.50, 5.79, 5.86, 6.37, 9.15, 11.98, 21.02, 40.32, 83.47),
}


@dataclass(frozen=True)
class FidelityPoint:
    what: str
    source: str
    published: float
    modelled: float
    unit: str

    @property
    def error(self) -> float:
        return self.modelled / self.published - 1.0

    @property
    def within(self) -> bool:
        return abs(self.error) <= TOLERANCE


# Where the fit starts: calibration §2.4's rule of thumb (hardware.py), blended as hypot.
RULE_OF_THUMB = Efficiency(compute=0.66, bandwidth=0.715, blend_exponent=2.0)


def _vidur_points(efficiency: Efficiency) -> list[FidelityPoint]:
    points = []
    for (gpu, model), times in VIDUR_MS.items():
        perf = LlmPerf(GPUS[gpu], MODELS[model], efficiency=efficiency)
        for tokens, ms in zip(VIDUR_TOKENS, times, strict=True):
            points.append(FidelityPoint(f"{model} {gpu} linear layers, {tokens} tokens/iteration",
                                        "calibration.md 2.4 (Vidur)", ms, perf.linear_s(tokens) * 1e3, "ms"))
    return points


def _static_throughput(perf: LlmPerf, batch: int, isl: int, osl: int) -> float:
    prefill_tokens = batch * isl
    chunks = -(-prefill_tokens // STEP_TOKEN_BUDGET)
    prefill_s = sum(perf.step_s(min(STEP_TOKEN_BUDGET, prefill_tokens - i * STEP_TOKEN_BUDGET), 0, 0, isl)
                    for i in range(chunks))
    decode_s = sum(perf.step_s(0, batch, batch * (isl + step)) for step in range(osl))
    return batch * osl / (prefill_s + decode_s)


def fidelity_points(efficiency: Efficiency = EFFICIENCY) -> list[FidelityPoint]:
    """Every published point against the worker model with ``efficiency``."""
    a100 = LlmPerf(GPUS["a100-80"], MODELS["llama-2-7b"], efficiency=efficiency)
    trt = "calibration.md 2.1 (TensorRT-LLM)"
    return [
        *_vidur_points(efficiency),
        FidelityPoint("llama-2-7b a100 TTFT batch 1, ISL 128", trt, 16.0, a100.prefill_s(128) * 1e3, "ms"),
        FidelityPoint("llama-2-7b a100 TTFT batch 1, ISL 2048", trt, 133.0, a100.prefill_s(2048) * 1e3, "ms"),
        FidelityPoint("llama-2-7b a100 max throughput 128/128, batch 384", trt, 5586.0,
                      _static_throughput(a100, 384, 128, 128), "tok/s"),
    ]


def fit_efficiency(start: Efficiency = RULE_OF_THUMB) -> Efficiency:
    """The efficiency whose model is closest to the published points: least squares on their
    relative errors, fractions of peak within (0.3, 1], blend exponent within [1, 8]."""

    def errors(x: NDArray[np.float64]) -> NDArray[np.float64]:
        efficiency = Efficiency(compute=float(x[0]), bandwidth=float(x[1]), blend_exponent=float(x[2]))
        return np.array([p.error for p in fidelity_points(efficiency)])

    fit = least_squares(errors, [start.compute, start.bandwidth, start.blend_exponent],
                        bounds=([0.3, 0.3, 1.0], [1.0, 1.0, 8.0]))
    return Efficiency(compute=float(fit.x[0]), bandwidth=float(fit.x[1]), blend_exponent=float(fit.x[2]))
