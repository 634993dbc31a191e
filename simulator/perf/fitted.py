"""A worker timing model fitted to a real engine, read from the profile a bench command wrote.

``bench.studies.fit_cpu_worker`` times the CPU chat engine step by step and writes a profile JSON: the
engine's batching settings (``engine``: the fields of ``EngineLimits``) and the fitted step-time
law (``step_law``: ``step_fit.StepLaw``). ``FittedPerf`` is the ``LlmPerfModel`` of that engine:
an iteration takes ``law.step_s(prompt tokens, decoding sequences, attended positions)``, where
each prompt chunk attends causally from its start and each decode token to its whole context,
plus ``served_decode_seq_s`` per decoding sequence (those resting in a short-prefill-first step
included: their last tokens are still being sent while it runs) when the profile has a ``served`` entry
(``bench.studies.served_cost``: what each token's response through Triton and the gateway adds on the
same cores; 0 models the engine alone), with the step's prefill work (its prompt tokens' and
their attention's terms, not the step overhead) scaled by ``served_prefill_factor``
(``bench.studies.served_ttft``: a prompt's prefill served against the engine alone; 1 models the engine
alone). The request's fixed path latency is not engine time: ``simulator.served_path``.

The host's speed during one run against its speed when the profile was measured: the engine's
own busy time in that run (its step counters, ``EngineBusy``) over what this model charges for the
same steps (``host_time_scale``). ``rescaled`` is this model at such a speed, and ``TimedPerf`` the
model whose speed follows the host's over a run, window by window.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from simulator.perf.protocol import EngineLimits, IterationWork
from simulator.perf.step_fit import StepLaw, chunk_attention_positions


@dataclass(frozen=True)
class EngineBusy:
    """What an engine's step counters (``shunter_llm_steps_total`` and the others) grew by over a
    run: steps, their wall seconds, prompt and decoded tokens, attended positions."""

    steps: int
    step_s: float
    prefill_tokens: int
    decode_tokens: int
    attention_positions: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineBusy:
        return cls(int(data["steps"]), float(data["step_s"]), int(data["prefill_tokens"]),
                   int(data["decode_tokens"]), float(data["attention_positions"]))


@dataclass(frozen=True)
class FittedPerf:
    """``LlmPerfModel`` of a measured engine: its limits and its fitted step law."""

    engine: EngineLimits
    law: StepLaw
    served_decode_seq_s: float = 0.0
    served_prefill_factor: float = 1.0

    def __post_init__(self) -> None:
        if self.served_decode_seq_s < 0 or self.served_prefill_factor <= 0:
            raise ValueError("served_decode_seq_s must be >= 0 and served_prefill_factor > 0")

    @property
    def limits(self) -> EngineLimits:
        return self.engine

    def iteration_s(self, work: IterationWork) -> float:
        attention = sum(chunk_attention_positions(start, count) for start, count in work.prefill_chunks)
        engine_s = self.law.step_s(work.prefill_tokens, work.decode_seqs, attention + work.decode_context_tokens)
        if self.served_prefill_factor != 1.0:
            engine_s += (self.served_prefill_factor - 1.0) * self._prefill_work_s(work.prefill_tokens, attention)
        return engine_s + self.served_decode_seq_s * (work.decode_seqs + work.resting_decoders)

    def modelled_busy_s(self, busy: EngineBusy) -> float:
        """What this model charges for the counted steps: the law on the counters' totals plus the
        served terms. The few sequences resting in short-prefill steps are not in the counters, and
        the served prefill factor applies to the prompt tokens' term only (the counters do not split
        attention by phase): about 1 % of the fidelity trace's busy time."""
        law = self.law
        return (law.busy_s(busy.steps, busy.prefill_tokens, busy.decode_tokens, busy.attention_positions)
                + (self.served_prefill_factor - 1.0) * law.prefill_token_s * busy.prefill_tokens
                + self.served_decode_seq_s * busy.decode_tokens)

    def host_time_scale(self, busy: EngineBusy) -> float:
        """The measured busy time over the modelled one; raise ValueError when no step was counted."""
        if busy.steps <= 0 or busy.step_s <= 0:
            raise ValueError("the engine counted no steps")
        return busy.step_s / self.modelled_busy_s(busy)

    def rescaled(self, scale: float) -> FittedPerf:
        """This model with every term (the law's and the served decode term) times ``scale``: the
        same engine on a host ``scale`` times slower."""
        law = self.law
        scaled = StepLaw(law.overhead_s * scale, law.prefill_token_s * scale, law.decode_seq_s * scale,
                         law.attention_s_per_ktoken * scale)
        return replace(self, law=scaled, served_decode_seq_s=self.served_decode_seq_s * scale)

    def _prefill_work_s(self, prompt_tokens: int, attention_positions: float) -> float:
        """The law's prefill terms of a step: its prompt tokens and their attended positions."""
        law = self.law
        return law.prefill_token_s * prompt_tokens + law.attention_s_per_ktoken * attention_positions / 1000.0

    def _prefill_chunks(self, prompt_tokens: int) -> list[tuple[int, int]]:
        """``(start, tokens)`` of the chunks that prefill one prompt alone, in order."""
        budget = min(self.engine.prefill_chunk_tokens, self.engine.step_token_budget)
        return [(start, min(budget, prompt_tokens - start)) for start in range(0, prompt_tokens, budget)]

    def prefill_s(self, prompt_tokens: int) -> float:
        """Time to first token of one prompt alone: its chunks back to back (served factor included)."""
        return sum(self.iteration_s(IterationWork(((start, count),), 0, 0, start))
                   for start, count in self._prefill_chunks(prompt_tokens))

    def prefill_split_s(self, prompt_tokens: int) -> tuple[float, float]:
        """The engine-alone prefill of one prompt alone as ``(step overheads, prefill work)`` in
        seconds (the law's terms; without the served factor); their sum is ``prefill_s`` at factor 1."""
        chunks = self._prefill_chunks(prompt_tokens)
        work = sum(self._prefill_work_s(count, chunk_attention_positions(start, count)) for start, count in chunks)
        return self.law.overhead_s * len(chunks), work

    def decode_step_s(self, sequences: float, context_tokens: int) -> float:
        """One decode iteration of ``sequences`` sequences of ``context_tokens`` tokens each, by the
        engine alone (the law; without the served term). The law is linear, so a time-weighted
        (fractional) number of sequences is allowed."""
        context = sequences * context_tokens
        return self.law.step_s(0, sequences, context)

    @classmethod
    def from_profile(cls, data: dict[str, Any]) -> FittedPerf:
        """From a profile's JSON object; raise KeyError/ValueError on a missing or bad field."""
        names = {f.name for f in fields(EngineLimits)}
        # The chat engine has admitted by priority since its first version: profiles written
        # before the field existed describe such an engine too.
        measured = {"priority_admission": True, **data["engine"]}
        engine = EngineLimits(**{k: v for k, v in measured.items() if k in names})
        served = data.get("served", {})
        return cls(engine, StepLaw.from_json(data["step_law"]), float(served.get("decode_seq_s", 0.0)),
                   float(served.get("prefill_factor", 1.0)))


@dataclass(frozen=True)
class TimedPerf:
    """``LlmPerfModel`` of an engine on a host whose speed changes over a run: ``windows`` are
    ``(end_s, model)`` in time order, and an iteration runs at the model of the window its start
    falls in (the last one's after the end). A multi-step decode segment runs at its start's."""

    windows: tuple[tuple[float, FittedPerf], ...]

    def __post_init__(self) -> None:
        ends = [end_s for end_s, _ in self.windows]
        if not ends or ends != sorted(ends):
            raise ValueError("a timed model needs windows in time order")

    @property
    def limits(self) -> EngineLimits:
        return self.windows[0][1].limits

    def iteration_s(self, work: IterationWork) -> float:
        index = bisect.bisect_left(self.windows, work.start_s, key=lambda window: window[0])
        return self.windows[min(index, len(self.windows) - 1)][1].iteration_s(work)


def load_fitted_perf(path: Path) -> FittedPerf:
    """Read a profile written by ``bench.studies.fit_cpu_worker``."""
    return FittedPerf.from_profile(json.loads(path.read_text()))
