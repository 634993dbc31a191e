"""Length buckets on the embedding encoder: padding waste and rows/s, one padded call against buckets.

``python -m bench length_buckets [--batches 8] [--rows 32] [--repeats 5] [--seed 0]``

The real all-MiniLM-L6-v2 encoder (``var/artifacts/embed``, ONNX Runtime, one thread as served)
encodes the same batches twice per repeat, alternating which goes first: once padded to each
batch's longest row (before) and once in length buckets (after, ``python_backends/length_buckets.py``).
The length mix is a retrieval workload built from the shipped real traces (``data/traces``): half
the rows are documents of the Azure conversation trace's prompt lengths cut into the model's
256-token chunks (every full chunk and the tail), half are short texts with the Azure code trace's
output lengths (median 13 tokens). Batches are ``--rows`` rows (embed's preferred Triton batch
sizes are 16, 32 and 64).
Reported: padding waste (share of padded token slots that hold no token), rows/s per variant
(median of the repeats), and their ratio per repeat; ``--out`` JSON.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.harness import BENCH_RESULTS
from bench.record import command_line, log, machine_facts
from python_backends.embed.encoder import SentenceEncoder
from python_backends.length_buckets import plan_buckets
from settings.paths import StackPaths
from simulator.workloads import load_azure

app = typer.Typer(add_completion=False)
CHUNK_TOKENS = 256
WORDS = ["the", "model", "reads", "each", "row", "of", "the", "batch", "and", "every", "word", "here", "is",
         "one", "token", "of", "its", "vocabulary", "so", "a", "text", "of", "n", "words", "is", "about", "n",
         "tokens", "long"]


def length_mix(count: int, rng: random.Random) -> list[int]:
    """Token lengths of ``count`` rows; see the module docstring."""
    chunks = []
    for item in load_azure("conv"):
        full, tail = divmod(item.prompt_tokens, CHUNK_TOKENS)
        chunks += [CHUNK_TOKENS] * full + ([tail] if tail else [])
    short = [min(CHUNK_TOKENS, item.output_tokens) for item in load_azure("code")]
    return [rng.choice(chunks) if rng.random() < 0.5 else rng.choice(short) for _ in range(count)]


def _text(tokens: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(max(1, tokens - 2)))  # [CLS] and [SEP] are the 2


def _rows_per_s(encoder: SentenceEncoder, batches: list[list[str]]) -> float:
    started = time.perf_counter()
    for batch in batches:
        encoder.encode(batch)
    return sum(len(b) for b in batches) / (time.perf_counter() - started)


def _waste(encoder: SentenceEncoder, batches: list[list[str]]) -> tuple[float, float]:
    """Padding waste (one call, buckets) over all batches."""
    real = padded = bucketed = 0
    for batch in batches:
        lengths = [len(e.ids) for e in encoder.tokenizer.encode_batch(batch)]
        real += sum(lengths)
        padded += len(lengths) * max(lengths)
        bucketed += sum(len(b) * max(lengths[i] for i in b) for b in plan_buckets(lengths))
    return 1 - real / padded, 1 - real / bucketed


@app.command()
def main(batches: Annotated[int, typer.Option(min=1, max=1000)] = 8,
         rows: Annotated[int, typer.Option(min=1, max=256)] = 32,
         repeats: Annotated[int, typer.Option(min=1, max=50)] = 5, seed: int = 0,
         out: Path = BENCH_RESULTS / "length_buckets.json") -> None:
    rng = random.Random(seed)
    lengths = length_mix(batches * rows, rng)
    texts = [_text(n) for n in lengths]
    work = [texts[i:i + rows] for i in range(0, len(texts), rows)]
    model_dir = StackPaths().artifacts / "embed"
    padded_encoder = SentenceEncoder(model_dir, bucket_overhead_tokens=None)
    bucketed_encoder = SentenceEncoder(model_dir)
    waste_before, waste_after = _waste(bucketed_encoder, work)
    runs: list[dict[str, float]] = []
    for repeat in range(repeats):
        order = [("before", padded_encoder), ("after", bucketed_encoder)]
        measured = {name: _rows_per_s(encoder, work) for name, encoder in (order if repeat % 2 == 0 else order[::-1])}
        measured["ratio"] = measured["after"] / measured["before"]
        runs.append(measured)
        log(f"repeat {repeat + 1}: before {measured['before']:.0f} rows/s, after {measured['after']:.0f} rows/s, "
            f"x{measured['ratio']:.2f}")
    result: dict[str, Any] = {
        "command": command_line(), "machine": machine_facts(), "rows": len(texts), "batch_rows": rows,
        "padding_waste": {"before": round(waste_before, 3), "after": round(waste_after, 3)},
        "rows_per_s_median": {k: round(statistics.median(r[k] for r in runs), 1) for k in ("before", "after")},
        "ratio_median": round(statistics.median(r["ratio"] for r in runs), 3),
        "ratios": [round(r["ratio"], 3) for r in runs],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    typer.echo(json.dumps({k: result[k] for k in ("padding_waste", "rows_per_s_median", "ratio_median", "ratios")}))
