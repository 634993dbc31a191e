"""The served cost of a generated token on the CPU chat engine, for the simulator's fitted worker.

``bench.fit_cpu_worker`` times the engine alone. Served through Triton and the gateway on the same
two cores, every generated token also costs a Triton response, a gRPC message and an SSE event,
and the engine's OpenMP threads lose their cores to that work (``docs/benchmarks.md``, "chat
served: CPU per generated token"). ``python -m bench.served_cost --continuous R --profile P``
reads a ``bench.continuous`` report ``R`` (served tokens/s at N streams of its fixed request)
and the fitted profile ``P``, and writes ``served`` into ``P``: ``decode_seq_s``, the median over
N of (N / served tokens per second - the law's decode step of N sequences at the request's mean
context) / N, i.e. the seconds each decoding sequence adds to a step when served, with the
figures it came from. ``simulator.fitted_perf.FittedPerf`` adds it per decoding sequence. It is
measured on its own workload (closed-loop streams of one request), never fitted to a replay.
Caveat: the served rate is over whole closed-loop generations, so the term also carries what a
generation costs outside its token stream (on the 1 December host about 0.13 s per 33-token
generation: 5.87 ms per sequence by rate, 2.1 ms by the inter-token gaps; docs/simulation.md 4b).
The entry is merged: ``bench.served_path``'s terms in it are kept.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.run import command_line
from bench.workload import CHAT_PROMPT
from control.paths import StackPaths
from gateway.tokenization import LlmTokenizer
from simulator.fitted_perf import FittedPerf

app = typer.Typer(add_completion=False)


def served_decode_seq_s(perf: FittedPerf, summary: list[dict[str, Any]], prompt_tokens: int,
                        completion_tokens: float) -> dict[str, Any]:
    """The served extra per decoding sequence per step (see the module docstring), per stream count
    and their median; ``summary`` rows carry ``streams`` and ``served_tokens_per_s``."""
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
            "context_tokens": context}


@app.command()
def main(continuous: Annotated[Path, typer.Option(help="bench.continuous JSON report.")],
         profile: Annotated[Path, typer.Option(help="Profile written by bench.fit_cpu_worker.")]) -> None:
    data = json.loads(profile.read_text())
    report = json.loads(continuous.read_text())
    perf = FittedPerf.from_profile(data)
    prompt_tokens = LlmTokenizer(StackPaths().artifacts / "chat" / "model.gguf").count(CHAT_PROMPT)
    completion = statistics.median(r["completion_tokens_p50"] for r in report["served"] if r["generations"])
    served = served_decode_seq_s(perf, report["summary"], prompt_tokens, completion)
    # merged: the entry also holds bench.served_path's terms, which this command leaves as they are
    data["served"] = {**data.get("served", {}), **served, "command": command_line(),
                      "from_report": report.get("command", str(continuous))}
    profile.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(served, indent=1))


if __name__ == "__main__":
    app()
