"""The chat engine's own ceiling: the served model decoding N sequences in one batch, no Triton.

``python -m bench ceiling --streams 1,4,8,16 [--max-tokens 64]`` loads the engine exactly as the
``chat`` model does (settings from ``config/models.yaml``), warms it up, then for each N submits
N copies of the benchmark prompt at once (greedy) and steps the engine until all finish. It prints
one JSON line: ``[{"streams": N, "completion_tokens": ..., "wall_s": ..., "tokens_per_s": ...}]``.
It runs in its own process so that its llama.cpp threads are gone before the served runs resume.
``--threads N`` overrides the engine's thread count and ``--cpus 1,2`` pins the process first (what
``bench continuous --isolate-engine`` passes: the engine as the isolated stack serves it).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from bench.workload import CHAT_MAX_TOKENS, CHAT_PROMPT
from control.repository import render_config
from control.stack import load_config
from python_backends.chat.engine import BatchEngine, ListSink
from python_backends.chat.params import GenerationParams
from settings.engine import EngineConfig
from settings.paths import StackPaths

app = typer.Typer(add_completion=False)


def engine_config(threads: int | None = None) -> EngineConfig:
    """The chat model's engine settings, read back from its rendered config.pbtxt (with ``threads``
    llama.cpp threads instead of the configured number, when given)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    chat = next(m for m in load_config(StackPaths()).models if m.name == "chat")
    parsed = text_format.Parse(render_config(chat, "cpu"), model_config_pb2.ModelConfig())
    config = EngineConfig.from_parameters({k: v.string_value for k, v in parsed.parameters.items()})
    return config if threads is None else replace(config, n_threads=threads)


def measure(engine: BatchEngine, streams: int, max_tokens: int) -> dict[str, float]:
    """Submit ``streams`` generations at once and run them all to the end."""
    params = GenerationParams(max_tokens=max_tokens, temperature=0.0)
    sinks = [ListSink() for _ in range(streams)]
    started = time.perf_counter()
    for sink in sinks:
        engine.submit(CHAT_PROMPT, params, sink)
    while engine.step():
        pass
    wall = time.perf_counter() - started
    tokens = sum(s.deltas[-1].completion_tokens for s in sinks)
    return {"streams": streams, "completion_tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall}


def served_engine(model: Path, threads: int | None = None) -> BatchEngine:
    """The engine on ``model`` with the chat model's served settings, warmed up."""
    engine = BatchEngine.load(model, engine_config(threads))
    engine.generate(CHAT_PROMPT, GenerationParams(max_tokens=8, temperature=0.0))
    return engine


@app.command()
def main(streams: Annotated[str, typer.Option(help="Comma-separated batch sizes.")] = "1,4,8,16",
         max_tokens: Annotated[int, typer.Option(help="Tokens per generation.")] = CHAT_MAX_TOKENS,
         threads: Annotated[int | None, typer.Option(help="llama.cpp threads (default: configured).")] = None,
         cpus: Annotated[str, typer.Option(help="Comma-separated CPUs to pin this process to first.")] = "") -> None:
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    engine = served_engine(Path(StackPaths().artifacts) / "chat" / "model.gguf", threads)
    results = [measure(engine, int(n), max_tokens) for n in streams.split(",") if n.strip()]
    print(json.dumps(results))

