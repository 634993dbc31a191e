"""A worker timing model fitted to a real engine, read from the profile a bench command wrote.

``bench.fit_cpu_worker`` times the CPU chat engine step by step and writes a profile JSON: the
engine's batching settings (``engine``: the fields of ``EngineLimits``) and the fitted step-time
law (``step_law``: ``step_fit.StepLaw``). ``FittedPerf`` is the ``LlmPerfModel`` of that engine:
an iteration takes ``law.step_s(prompt tokens, decoding sequences, attended positions)``, where
each prompt chunk attends causally from its start and each decode token to its whole context,
plus ``served_decode_seq_s`` per decoding sequence when the profile has a ``served`` entry
(``bench.served_cost``: what each token's response through Triton and the gateway adds on the
same cores; 0 models the engine alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from simulator.perf_model import EngineLimits, IterationWork
from simulator.step_fit import StepLaw, chunk_attention_positions


@dataclass(frozen=True)
class FittedPerf:
    """``LlmPerfModel`` of a measured engine: its limits and its fitted step law."""

    engine: EngineLimits
    law: StepLaw
    served_decode_seq_s: float = 0.0

    @property
    def limits(self) -> EngineLimits:
        return self.engine

    def iteration_s(self, work: IterationWork) -> float:
        attention = sum(chunk_attention_positions(start, count) for start, count in work.prefill_chunks)
        engine_s = self.law.step_s(work.prefill_tokens, work.decode_seqs, attention + work.decode_context_tokens)
        return engine_s + self.served_decode_seq_s * work.decode_seqs

    def prefill_s(self, prompt_tokens: int) -> float:
        """Time to first token of one prompt alone: its chunks back to back."""
        total, done = 0.0, 0
        budget = min(self.engine.prefill_chunk_tokens, self.engine.step_token_budget)
        while done < prompt_tokens:
            chunk = min(budget, prompt_tokens - done)
            total += self.iteration_s(IterationWork(((done, chunk),), 0, 0, done))
            done += chunk
        return total

    def decode_step_s(self, sequences: int, context_tokens: int) -> float:
        """One decode iteration of ``sequences`` sequences of ``context_tokens`` tokens each, by the
        engine alone (the law; without the served term)."""
        context = sequences * context_tokens
        return self.law.step_s(0, sequences, context)

    @classmethod
    def from_profile(cls, data: dict[str, Any]) -> FittedPerf:
        """From a profile's JSON object; raise KeyError/ValueError on a missing or bad field."""
        names = {f.name for f in fields(EngineLimits)}
        engine = EngineLimits(**{k: v for k, v in data["engine"].items() if k in names})
        served = float(data.get("served", {}).get("decode_seq_s", 0.0))
        return cls(engine, StepLaw.from_json(data["step_law"]), served)


def load_fitted_perf(path: Path) -> FittedPerf:
    """Read a profile written by ``bench.fit_cpu_worker``."""
    return FittedPerf.from_profile(json.loads(path.read_text()))
