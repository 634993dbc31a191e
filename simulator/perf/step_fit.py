"""The step-time law of a measured LLM engine, fitted from timed engine steps.

One engine step feeds ``prefill_tokens`` prompt tokens and one token for each of ``decode_seqs``
decoding sequences; every fed token attends to the tokens before it in its sequence, and
``attention_positions`` is that sum over the step's tokens (a chunk of ``count`` tokens starting
at position ``start`` attends to ``count * start + count * (count - 1) / 2`` positions). The law is

    step_s = overhead_s + prefill_token_s * prefill_tokens + decode_seq_s * decode_seqs
             + attention_s_per_ktoken * attention_positions / 1000

(on a CPU every term is compute on the same cores, so it is a sum, not a roofline blend).
``fit_step_law(samples)`` finds the non-negative coefficients by least squares on the samples'
relative error (short and long steps weigh alike); a coefficient that least squares would make
negative is dropped (fixed at 0) and the rest refitted. On a shared machine some steps are slowed
by other processes (measured here: 63-token prefill steps at 0.18 s alone, 2.5 s while another
job held the cores), so the fit is trimmed: after a first fit, samples slower than the law by more
than ``outlier_factor`` are dropped and the law refitted once (only slow outliers: contention never
makes a step faster).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

FEATURES = ("overhead_s", "prefill_token_s", "decode_seq_s", "attention_s_per_ktoken")


def chunk_attention_positions(start: int, count: int) -> float:
    """Positions attended by ``count`` tokens fed from position ``start`` on (causal)."""
    return count * start + count * (count - 1) / 2.0


@dataclass(frozen=True)
class StepSample:
    """One timed engine step: what it fed and how long it took (wall seconds)."""

    prefill_tokens: int
    decode_seqs: int
    attention_positions: float
    wall_s: float


@dataclass(frozen=True)
class StepLaw:
    """Fitted coefficients (seconds per step, per prompt token, per decoding sequence, per
    thousand attended positions); ``step_s`` evaluates the law."""

    overhead_s: float
    prefill_token_s: float
    decode_seq_s: float
    attention_s_per_ktoken: float

    def step_s(self, prefill_tokens: int, decode_seqs: float, attention_positions: float) -> float:
        return (self.overhead_s + self.prefill_token_s * prefill_tokens + self.decode_seq_s * decode_seqs
                + self.attention_s_per_ktoken * attention_positions / 1000.0)

    def busy_s(self, steps: int, prefill_tokens: int, decode_seqs: int, attention_positions: float) -> float:
        """The summed ``step_s`` of ``steps`` steps that fed these totals between them (the law is
        linear, so the totals are enough: an engine's counters give them)."""
        return self.overhead_s * (steps - 1) + self.step_s(prefill_tokens, decode_seqs, attention_positions)

    def to_json(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in FEATURES}

    @classmethod
    def from_json(cls, data: dict[str, float]) -> StepLaw:
        return cls(**{name: float(data[name]) for name in FEATURES})


def _design(samples: Sequence[StepSample]) -> np.ndarray[Any, np.dtype[np.float64]]:
    return np.array([[1.0, s.prefill_tokens, s.decode_seqs, s.attention_positions / 1000.0] for s in samples])


def fit_step_law(samples: Sequence[StepSample], outlier_factor: float | None = 1.5) -> StepLaw:
    """Trimmed non-negative least squares on relative error (module docstring); ``None``: no trim.
    Raise ValueError with fewer samples than coefficients or a non-positive wall time."""
    law = _nnls(samples)
    if outlier_factor is None:
        return law
    kept = [s for s in samples
            if s.wall_s <= outlier_factor * law.step_s(s.prefill_tokens, s.decode_seqs, s.attention_positions)]
    return _nnls(kept) if len(kept) >= len(FEATURES) else law


def _nnls(samples: Sequence[StepSample]) -> StepLaw:
    if len(samples) < len(FEATURES):
        raise ValueError(f"need at least {len(FEATURES)} samples, got {len(samples)}")
    walls = np.array([s.wall_s for s in samples])
    if np.any(walls <= 0):
        raise ValueError("every sample needs a positive wall time")
    design = _design(samples) / walls[:, None]  # relative error: divide each row by its target
    target = np.ones(len(samples))
    active = list(range(len(FEATURES)))
    coefficients = np.zeros(len(FEATURES))
    while active:
        solution, *_ = np.linalg.lstsq(design[:, active], target, rcond=None)
        if np.all(solution >= 0):
            coefficients[active] = solution
            break
        active.pop(int(np.argmin(solution)))  # the most negative term is dropped, the rest refitted
    return StepLaw(*(float(c) for c in coefficients))


def relative_errors(law: StepLaw, samples: Sequence[StepSample]) -> list[float]:
    """``modelled / measured - 1`` of each sample."""
    return [law.step_s(s.prefill_tokens, s.decode_seqs, s.attention_positions) / s.wall_s - 1.0 for s in samples]
