"""The served cost of a generated token on the CPU chat engine, for the simulator's fitted worker.

``bench.studies.fit_cpu_worker`` times the engine alone. Served through Triton and the gateway on the same
two cores, every generated token also costs a Triton response, a gRPC message and an SSE event,
and the engine's OpenMP threads lose their cores to that work (``docs/benchmarks.md``, "chat:
continuous batching served through the stack", the row "chat served: CPU per generated token").
``python -m bench studies.served_cost --continuous R --profile P`` reads a ``bench.continuous``
report ``R`` and the fitted profile ``P`` and writes ``served`` into ``P``: ``decode_seq_s``, the
seconds each decoding sequence adds to a step when served, which
``simulator.perf.fitted.FittedPerf`` adds per decoding sequence (resting ones included), and
``end_path_s``, what a generation's end costs outside the engine. Measured on its own workload
(closed-loop streams of one request), never fitted to a replay.

How, from the inter-token gaps (``served_decode_from_gaps``; reports with per-generation
``spans``): a streaming generation's first-to-last chunk span holds ``gaps`` decode steps of the
``n`` sequences streaming meanwhile (time-weighted) plus one prefill step for each other generation
whose first chunk fell inside it (the chat engine's short-prefill-first steps; with its prefix
cache the repeated prompt prefills its last token only) with the other ``n - 1`` decoders resting:

    span = gaps x (law decode step of n + n x d) + prefills x (law prefill of 1 token + (n - 1) x d)

summed over every generation of a run, solved for ``d``; a run where others took more than
``QUIET_SHARE`` of the cores is left out; ``decode_seq_s`` is the median over the rest. Why not
the served rate (the old ``served_decode_seq_s``, kept for reports without spans): a rate is a
token-weighted mean over the window, so it also carries every stall of the window (a run whose
median inter-token gap said 10 ms streamed at a mean of 14 ms), the steps nobody streams in
(end-of-generation, prefill) and, with Triton's dynamic batcher on the chat model, the time
requests wait in Triton's queue (``docs/simulation.md`` 4b): it read 5.87 ms per sequence on the
1 December host where the gaps say about 2 ms.

``end_path_s``: the median over 1-stream runs of the tail (last text chunk to the stream's end)
minus the law's decode step (the end-of-generation token's step, which the simulated sequence
already takes): the final response, usage chunk and ``[DONE]`` crossing Triton and the gateway.
It is reported, not applied: on the real stack it only delays the client's ``[DONE]`` and the
gateway's release of the request's budget, both after the last token (``simulator.served_path``).
The entry is merged: ``bench.studies.served_ttft``'s terms in it are kept.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cpu import check_same_isolation
from bench.record import command_line
from bench.workload import CHAT_PROMPT
from gateway.tokenization import LlmTokenizer
from settings.paths import PROJECT_ROOT, StackPaths
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import IterationWork

app = typer.Typer(add_completion=False)
QUIET_SHARE = 0.10  # others' share of the cores above which a run is left out (bench.studies.served_ttft's bound)
METHOD_KEYS = ("per_streams_s", "per_run_s", "end_path_s", "runs_left_out", "method", "context_tokens")
PREFIX_HIT_PREFILL_TOKENS = 1  # the engine reuses all but the last prompt token of the repeated request


def served_decode_seq_s(perf: FittedPerf, summary: list[dict[str, Any]], prompt_tokens: int,
                        completion_tokens: float) -> dict[str, Any]:
    """The served extra per decoding sequence per step from the served rate: the median over N of
    (N / tokens per second - the law's decode step of N) / N (module docstring: why the gaps are
    better); ``summary`` rows carry ``streams`` and ``served_tokens_per_s``."""
    context = round(prompt_tokens + completion_tokens / 2)
    extra: dict[str, float] = {}
    for row in summary:
        streams, rate = int(row["streams"]), float(row["served_tokens_per_s"])
        if rate <= 0:
            continue
        served_step_s = streams / rate
        extra[str(streams)] = (served_step_s - perf.decode_step_s(streams, context)) / streams
    if not extra:
        raise ValueError("the report has no served throughput")
    return {"decode_seq_s": max(0.0, statistics.median(extra.values())), "per_streams_s": extra,
            "context_tokens": context, "method": "rate"}


def _engine_alone(perf: FittedPerf) -> FittedPerf:
    return FittedPerf(perf.engine, perf.law, 0.0, perf.served_prefill_factor)


def run_decode_seq_s(perf: FittedPerf, spans: list[list[float]], prompt_tokens: int, context_tokens: int) -> float:
    """``d`` of one run from its generations' ``[span_s, gaps, decoding_mean, prefills]`` (module
    docstring); raise ValueError without spans."""
    alone = _engine_alone(perf)
    start = prompt_tokens - PREFIX_HIT_PREFILL_TOKENS
    prefill_s = alone.iteration_s(IterationWork(((start, PREFIX_HIT_PREFILL_TOKENS),), 0, 0, start))
    measured = known = per_d = 0.0
    for span_s, gaps, decoding, prefills in spans:
        measured += span_s
        known += gaps * alone.decode_step_s(decoding, context_tokens) + prefills * prefill_s
        per_d += gaps * decoding + prefills * max(0.0, decoding - 1.0)
    if per_d <= 0:
        raise ValueError("no streaming generation in the run")
    return (measured - known) / per_d


def served_decode_from_gaps(perf: FittedPerf, report: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    """``decode_seq_s`` and ``end_path_s`` from a ``bench.continuous`` report with spans (module
    docstring), with the per-run figures they came from; raise ValueError when no quiet run has spans."""
    runs = [r for r in report["served"] if r.get("spans") and r.get("others_share", 0.0) <= QUIET_SHARE]
    if not runs:
        raise ValueError("the report has no quiet run with per-generation spans (an older bench.continuous?)")
    completion = statistics.median(r["completion_tokens_p50"] for r in runs)
    context = round(prompt_tokens + completion / 2)
    per_run = {f"{r['streams']}#{r['repeat']}": run_decode_seq_s(perf, r["spans"], prompt_tokens, context)
               for r in runs}
    alone = _engine_alone(perf)
    ends = [t / 1000.0 - alone.decode_step_s(1, context) for r in runs if r["streams"] == 1 for t in r["tail_ms"]]
    return {"decode_seq_s": max(0.0, statistics.median(per_run.values())), "per_run_s": per_run,
            "end_path_s": statistics.median(ends) if ends else None, "context_tokens": context,
            "runs_left_out": len(report["served"]) - len(runs), "method": "gaps"}


@app.command()
def main(continuous: Annotated[Path, typer.Option(help="bench.continuous JSON report.")],
         profile: Annotated[Path, typer.Option(help="Profile written by bench.studies.fit_cpu_worker.")]) -> None:
    data = json.loads(profile.read_text())
    report = json.loads(continuous.read_text())
    check_same_isolation(f"{profile} and {continuous}", data, report)
    perf = FittedPerf.from_profile(data)
    prompt_tokens = LlmTokenizer(StackPaths().artifacts / "chat" / "model.gguf").count(CHAT_PROMPT)
    if any(r.get("spans") for r in report["served"]):
        served = served_decode_from_gaps(perf, report, prompt_tokens)
    else:
        completion = statistics.median(r["completion_tokens_p50"] for r in report["served"] if r["generations"])
        served = served_decode_seq_s(perf, report["summary"], prompt_tokens, completion)
    # merged: the entry also holds bench.studies.served_ttft's terms, which this command leaves as they are
    source = continuous.resolve()
    kept = {k: v for k, v in data.get("served", {}).items() if k not in METHOD_KEYS}  # the other method's go
    data["served"] = {**kept, **served, "command": command_line(),
                      "from_report": report.get("command", str(continuous)),
                      "report_path": str(source.relative_to(PROJECT_ROOT) if source.is_relative_to(PROJECT_ROOT)
                                         else source)}
    profile.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(served, indent=1))

