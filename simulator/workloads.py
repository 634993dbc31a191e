"""Workloads: arrival times and token lengths, from the real traces in ``data/traces`` (sources and
licences in ``data/traces/SOURCES.md``) or from length distributions with Poisson or Gamma
arrivals; a load scale compresses time.

All randomness comes from the ``random.Random`` passed in; the traces are read once at the edge.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

DEFAULT_TRACES_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"  # shipped in the repository
AZURE = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
LENGTHS = {"sharegpt": "sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
           "arxiv": "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"}


@dataclass(frozen=True)
class TraceItem:
    """One request of a workload: arrival (s from the start), prompt and output tokens."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int


def _seconds(stamp: str) -> float:
    """``YYYY-MM-DD hh:mm:ss.fffffff`` (7 fractional digits) to seconds since the epoch day 0."""
    day, _, clock = stamp.strip().partition(" ")
    hours, minutes, seconds = clock.split(":")
    return date.fromisoformat(day).toordinal() * 86400.0 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def load_azure(kind: str, traces_dir: Path = DEFAULT_TRACES_DIR, limit: int | None = None) -> list[TraceItem]:
    """The Azure LLM inference trace 2023 (``conv`` or ``code``), times relative to its first row."""
    path = traces_dir / AZURE[kind]
    items: list[TraceItem] = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            items.append(TraceItem(_seconds(row["TIMESTAMP"]), int(row["ContextTokens"]),
                                   max(1, int(row["GeneratedTokens"]))))
            if limit is not None and len(items) >= limit:
                break
    start = min(item.arrival_s for item in items)
    return sorted((replace(item, arrival_s=item.arrival_s - start) for item in items),
                  key=lambda item: item.arrival_s)


def load_lengths(kind: str, traces_dir: Path = DEFAULT_TRACES_DIR) -> list[tuple[int, int]]:
    """(prompt, output) token pairs of the ShareGPT or arXiv length distribution."""
    with (traces_dir / LENGTHS[kind]).open(newline="") as handle:
        return [(int(row["num_prefill_tokens"]), max(1, int(row["num_decode_tokens"])))
                for row in csv.DictReader(handle)]


def synthetic(lengths: list[tuple[int, int]], rate_per_s: float, count: int, rng: random.Random,
              cv: float = 1.0) -> list[TraceItem]:
    """``count`` requests with lengths drawn from ``lengths`` and inter-arrival times from a Gamma
    distribution of mean ``1 / rate_per_s`` and coefficient of variation ``cv`` (1: Poisson)."""
    if rate_per_s <= 0 or cv <= 0:
        raise ValueError("rate_per_s and cv must be > 0")
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate_per_s * shape)
    now, items = 0.0, []
    for _ in range(count):
        now += rng.gammavariate(shape, scale)
        prompt, output = lengths[rng.randrange(len(lengths))]
        items.append(TraceItem(now, prompt, output))
    return items


def scale_load(items: list[TraceItem], factor: float) -> list[TraceItem]:
    """The same requests arriving ``factor`` times as fast (time compressed)."""
    if factor <= 0:
        raise ValueError("factor must be > 0")
    return [replace(item, arrival_s=item.arrival_s / factor) for item in items]


def window(items: list[TraceItem], start_s: float, end_s: float) -> list[TraceItem]:
    """The requests arriving in ``[start_s, end_s)``, re-timed to start at 0."""
    return [replace(i, arrival_s=i.arrival_s - start_s) for i in items if start_s <= i.arrival_s < end_s]


def mean_rate(items: list[TraceItem]) -> float:
    span = items[-1].arrival_s - items[0].arrival_s if len(items) > 1 else 0.0
    return (len(items) - 1) / span if span > 0 else 0.0


SD_TRACE = "lora_request_trace.csv"


@dataclass(frozen=True)
class DiffusionItem:
    """One image-generation request of the Alibaba GenAI trace: arrival (s from the first row),
    denoising steps x images (the work, in steps) and the execution time Alibaba measured."""

    arrival_s: float
    steps: int
    exec_time_s: float


def load_diffusion(traces_dir: Path = DEFAULT_TRACES_DIR, limit: int | None = None) -> list[DiffusionItem]:
    """The succeeded requests of the Alibaba Stable Diffusion serving trace, in arrival order."""
    items: list[DiffusionItem] = []
    with (traces_dir / SD_TRACE).open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["predict_status"] != "SUCCEED" or not row["num_inference_steps"] or not row["exec_time_seconds"]:
                continue
            images = max(1, int(float(row["num_images_per_prompt"] or 1)))
            steps = max(1, int(float(row["num_inference_steps"]))) * images
            items.append(DiffusionItem(_seconds(row["gmt_create"] + ".0"), steps, float(row["exec_time_seconds"])))
            if limit is not None and len(items) >= limit:
                break
    start = min((item.arrival_s for item in items), default=0.0)
    return sorted((replace(item, arrival_s=item.arrival_s - start) for item in items), key=lambda i: i.arrival_s)
