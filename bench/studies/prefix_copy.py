"""What a prefix copy costs the chat engine and what it saves, on the served model (no Triton).

``python -m bench studies.prefix_copy [--system-sentences 80] [--repeats 8]`` loads the engine with the
``chat`` model's settings and prints one JSON line:

- ``step_ms`` / ``copy_step_ms``: the median one-token step into an empty stream, alone and right
  after ``LlamaRuntime.copy_prefix`` (llama.cpp copies the source's whole stream, every cell);
- ``prefill_s`` / ``copied_s``: a system-prompt chat prompt prefilled in full, against its first
  tokens copied from a stream that holds them and only the last 40 prefilled;
- ``max_logit_difference``: between the two ways' last logits (0 when the copy is exact).

Run it under ``flock /tmp/shunter-integration.lock`` on a shared host.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from bench.ceiling import served_engine
from bench.shared_prefix import SENTENCE
from bench.workload import chat_prompt
from python_backends.chat.llama_runtime import BatchEntry, LlamaRuntime
from settings.paths import StackPaths

app = typer.Typer(add_completion=False)
CHUNK_TOKENS = 60  # below the engine's 63-token step, as the engine feeds a prompt
SUFFIX_TOKENS = 40


def _feed(runtime: LlamaRuntime, tokens: list[int], seq: int, start: int, end: int) -> np.ndarray | None:
    """Prefill ``tokens[start:end]`` into sequence ``seq`` in engine-sized chunks; the logits of
    the prompt's last token when ``end`` is its end."""
    last = None
    for low in range(start, end, CHUNK_TOKENS):
        high = min(end, low + CHUNK_TOKENS)
        wanted = high == len(tokens)
        rows = runtime.decode([BatchEntry(tokens[i], seq, i, wanted and i == high - 1) for i in range(low, high)])
        last = rows[0] if rows else last
    return last


def _step_ms(runtime: LlamaRuntime, token: int, repeats: int, source: int | None) -> float:
    """Median ms of a one-token step into an empty sequence, after a copy from ``source`` if given."""
    times = []
    for _ in range(repeats):
        target = 2
        started = time.perf_counter()
        if source is not None:
            runtime.copy_prefix(source, target, 1)
            runtime.decode([BatchEntry(token, target, 1, True)])
        else:
            runtime.decode([BatchEntry(token, target, 0, True)])
        times.append(time.perf_counter() - started)
        runtime.remove(target)
    return 1000 * statistics.median(times)


@app.command()
def main(system_sentences: Annotated[int, typer.Option(min=1, max=200)] = 80,
         repeats: Annotated[int, typer.Option(min=1, max=100)] = 8) -> None:
    """See the module docstring."""
    engine = served_engine(Path(StackPaths().artifacts) / "chat" / "model.gguf")
    runtime = engine.runtime
    for slot in range(engine.config.max_running):
        runtime.remove(slot)
    system = " ".join([SENTENCE] * system_sentences)
    tokens = runtime.tokenize(chat_prompt(system, "What is 2 plus 3?"))
    started = time.perf_counter()
    prefilled = _feed(runtime, tokens, 0, 0, len(tokens))
    prefill_s = time.perf_counter() - started
    keep = len(tokens) - SUFFIX_TOKENS
    _feed(runtime, tokens, 1, 0, keep)
    started = time.perf_counter()
    runtime.copy_prefix(1, 3, keep)
    copied = _feed(runtime, tokens, 3, keep, len(tokens))
    copied_s = time.perf_counter() - started
    assert prefilled is not None and copied is not None
    result = {"prompt_tokens": len(tokens), "copied_tokens": keep, "prefill_s": prefill_s, "copied_s": copied_s,
              "max_logit_difference": float(np.max(np.abs(prefilled - copied))),
              "cells_per_sequence": engine.config.cells_per_sequence,
              "step_ms": _step_ms(runtime, tokens[0], repeats, None),
              "copy_step_ms": _step_ms(runtime, tokens[0], repeats, 0)}
    runtime.close()
    print(json.dumps(result))

