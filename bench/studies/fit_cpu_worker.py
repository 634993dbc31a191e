"""Measure the real CPU chat engine step by step and fit the simulator's worker profile to it.

``python -m bench studies.fit_cpu_worker [--out docs/sim/cpu_worker_profile.json]`` loads the engine
exactly as the ``chat`` model serves it (``bench.ceiling``: settings from ``config/models.yaml``),
warms it up, then runs four scenarios, timing every ``BatchEngine.step()`` and reading what the
step fed from the sequences' progress (``computed`` before and after):

1. prefill alone: one prompt of 16 … 2,000 tokens, one output token (chunks at every position);
2. decode: 1 … 16 short prompts decoding together (the steps with only decodes);
3. decode at long context: 4 and 16 prompts of ~500 tokens decoding together;
4. mixed: 8 sequences decoding while a short and a long prompt arrive (short-prefill-first
   steps and chunked prefill mixed with decodes).

Prompts are unique word sequences (no prefix shared with another prompt, so no prefix-cache
hit; steps with a hit or a preemption are left out), greedy decoding as in the fidelity replay.
It fits ``simulator.perf.step_fit.StepLaw`` to all steps and writes the profile: the engine's limits
(read from its config), the law, the fit's error, the raw samples and how much CPU other
processes took during each scenario (``bench.contention``; before each scenario it waits, up to
``--max-quiet-wait-s``, for the cores to be free). Run it under the integration lock (it uses
both cores for about two minutes). ``--refit-only`` refits a profile from its own samples.
``--isolate-engine`` measures the engine as ``bench.harness`` serves it with that flag: one llama.cpp
thread, this process pinned to the last CPU (the profile records it as ``isolation``).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.ceiling import engine_config
from bench.contention import CpuWatch, wait_for_quiet
from bench.cpu import isolation_entry
from bench.harness import IsolateEngine, isolation_if
from bench.workload import SENTENCES
from python_backends.chat.engine import BatchEngine, ListSink
from python_backends.chat.params import GenerationParams
from python_backends.chat.sequence import Sequence
from settings.engine import EngineConfig
from settings.paths import StackPaths
from simulator.perf.step_fit import StepLaw, StepSample, chunk_attention_positions, fit_step_law, relative_errors

app = typer.Typer(add_completion=False)
DEFAULT_OUT = Path("docs/sim/cpu_worker_profile.json")
PREFILL_LENGTHS = (16, 40, 63, 126, 250, 500, 1000, 2000)
DECODE_STREAMS = (1, 2, 4, 8, 12, 16)
OUTLIER_FACTOR = 1.5  # steps slower than 1.5 x the first fit are left out (simulator.perf.step_fit)
WORDS = " ".join(SENTENCES).replace(".", "").replace(",", "").lower().split()


class PromptMaker:
    """Unique prompts of a given token length (``tokenize`` is the engine's own tokenizer)."""

    def __init__(self, tokenize: Callable[[str], list[int]], seed: int = 0) -> None:
        self.tokenize = tokenize
        self.rng = random.Random(seed)
        self.count = 0

    def make(self, tokens: int) -> str:
        """A prompt of at least ``tokens`` tokens (exact up to one word), starting uniquely."""
        self.count += 1
        words = [f"item{self.count}", *self.rng.choices(WORDS, k=tokens)]
        low, high = 1, len(words)
        while low < high:  # fewest words reaching ``tokens`` tokens
            middle = (low + high) // 2
            if len(self.tokenize(" ".join(words[:middle]))) >= tokens:
                high = middle
            else:
                low = middle + 1
        return " ".join(words[:low])


def _sample(before: list[tuple[Sequence, int, bool]], wall_s: float) -> StepSample | None:
    """What one step fed, from each sequence's progress; None if it preempted or reused a prefix."""
    prefill, decode, attention = 0, 0, 0.0
    for seq, computed, decoding in before:
        fed = seq.computed - computed
        if fed < 0:
            return None
        if decoding and fed == 1:
            decode += 1
        else:
            prefill += fed
        attention += chunk_attention_positions(computed, fed)
    return StepSample(prefill, decode, attention, wall_s) if prefill + decode else None


def run_timed(engine: BatchEngine, arrivals: dict[int, list[tuple[str, int]]]) -> list[StepSample]:
    """Step the engine until idle; ``arrivals[k]`` = prompts (text, max_tokens) submitted before step k."""
    samples: list[StepSample] = []
    step = 0
    while True:
        for prompt, max_tokens in arrivals.get(step, []):
            engine.submit(prompt, GenerationParams(max_tokens=max_tokens, temperature=0.0), ListSink())
        if not engine.has_work and step >= max(arrivals, default=0):
            return samples
        scheduler = engine.scheduler
        before = [(s, s.computed, s.decoding) for s in [*scheduler.running, *scheduler.waiting]]
        hits = scheduler.prefix_hit_tokens_total
        started = time.perf_counter()
        engine.step()
        wall_s = time.perf_counter() - started
        sample = _sample(before, wall_s)
        if sample is not None and scheduler.prefix_hit_tokens_total == hits:
            samples.append(sample)
        step += 1


def scenarios(prompts: PromptMaker) -> dict[str, list[dict[int, list[tuple[str, int]]]]]:
    """The arrival plans of the four scenarios (module docstring)."""
    return {
        "prefill": [{0: [(prompts.make(n), 1)]} for n in PREFILL_LENGTHS for _ in range(2)],
        "decode": [{0: [(prompts.make(24), 40) for _ in range(n)]} for n in DECODE_STREAMS],
        "decode_long_context": [{0: [(prompts.make(500), 24) for _ in range(n)]} for n in (4, 16)],
        "mixed": [{0: [(prompts.make(24), 60) for _ in range(8)], 12: [(prompts.make(40), 20)],
                   20: [(prompts.make(300), 20)], 30: [(prompts.make(30), 20), (prompts.make(200), 20)]}],
    }


def engine_limits(config: EngineConfig) -> dict[str, Any]:
    """The engine settings the simulator's worker must copy (``simulator.perf.fitted``)."""
    return {"max_sequences": config.max_running, "step_token_budget": config.max_batch_tokens,
            "prefill_chunk_tokens": config.prefill_chunk_tokens, "kv_pool_tokens": config.total_blocks
            * config.block_tokens, "kv_block_tokens": config.block_tokens,
            "short_prefill_first": config.short_prefill_first, "priority_admission": True,  # Sequence.waiting_key
            "context_tokens": config.sequence_limit_tokens}


def _summary(law: StepLaw, samples: list[StepSample]) -> dict[str, float]:
    """How well ``law`` fits: share of steps kept by the trim (not slowed past 1.5 x the law by
    other processes) and the absolute relative error of the kept ones."""
    errors = relative_errors(law, samples)
    kept = sorted(abs(e) for e in errors if e >= 1 / OUTLIER_FACTOR - 1)
    if not kept:
        return {"steps": len(samples), "kept_share": 0.0}
    return {"steps": len(samples), "kept_share": len(kept) / len(samples),
            "kept_median_abs_error": statistics.median(kept), "kept_p90_abs_error": kept[int(0.9 * (len(kept) - 1))]}


def write_profile(out: Path, engine: dict[str, Any], by_scenario: dict[str, list[StepSample]],
                  extra: dict[str, Any]) -> StepLaw:
    """Fit the law to every scenario's steps and write the profile JSON; return the law."""
    samples = [s for group in by_scenario.values() for s in group]
    law = fit_step_law(samples, OUTLIER_FACTOR)
    where = f"alone on CPU {extra['isolation']['engine_cpus']}" if extra.get("isolation") else "this machine's cores"
    profile = {
        "what": f"SmolLM2-135M Q4_1 on llama.cpp, the chat model's engine as served, {where}",
        "command": "python -m bench studies.fit_cpu_worker", **extra, "engine": engine, "step_law": law.to_json(),
        "fit": {"all": _summary(law, samples), **{k: _summary(law, v) for k, v in by_scenario.items()}},
        "samples": {k: [[s.prefill_tokens, s.decode_seqs, s.attention_positions, round(s.wall_s, 6)] for s in v]
                    for k, v in by_scenario.items()},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1) + "\n")
    return law


def refit(out: Path) -> StepLaw:
    """Refit an existing profile from its own samples (no measuring)."""
    profile = json.loads(out.read_text())
    by_scenario = {k: [StepSample(int(a), int(b), float(c), float(d)) for a, b, c, d in v]
                   for k, v in profile["samples"].items()}
    extra = {k: profile[k] for k in ("load_average_1_5_15", "contention", "isolation") if k in profile}
    return write_profile(out, profile["engine"], by_scenario, extra)


@app.command()
def main(out: Annotated[Path, typer.Option(help="profile JSON to write")] = DEFAULT_OUT,
         refit_only: Annotated[bool, typer.Option(help="refit OUT from its own samples")] = False,
         max_quiet_wait_s: Annotated[float, typer.Option(help="wait this long at most for other processes "
                                                         "to leave the cores before each scenario")] = 300.0,
         isolate_engine: IsolateEngine = False) -> None:
    if refit_only:
        print(json.dumps(refit(out).to_json()))
        return
    load_before = os.getloadavg()
    isolation = isolation_if(isolate_engine)
    config = engine_config(isolation.threads if isolation is not None else None)
    if isolation is not None:
        print(f"engine isolation {isolation.to_json()}: {isolation.pin_this_process()} threads pinned")
    engine = BatchEngine.load(Path(StackPaths().artifacts) / "chat" / "model.gguf", config)
    engine.generate("Hello", GenerationParams(max_tokens=8, temperature=0.0))
    prompts = PromptMaker(engine.tokenize)
    by_scenario: dict[str, list[StepSample]] = {}
    contention: dict[str, dict[str, float]] = {}
    for name, plans in scenarios(prompts).items():
        quiet = wait_for_quiet(max_quiet_wait_s)
        watch = CpuWatch([])
        by_scenario[name] = [s for plan in plans for s in run_timed(engine, plan)]
        contention[name] = {**watch.stop(), "quiet_wait_s": quiet["waited_s"]}
        print(f"{name}: {len(by_scenario[name])} steps, {contention[name]}", flush=True)
    extra = {"load_average_1_5_15": {"before": load_before, "after": os.getloadavg()}, "contention": contention,
             **isolation_entry(isolation)}
    law = write_profile(out, engine_limits(config), by_scenario, extra)
    print(json.dumps(law.to_json()))

