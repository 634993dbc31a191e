"""Chat streams that share a long system prompt, through a private stack.

``python -m bench shared_prefix [--scheduling FILE] [--streams 8] [--duration-s 40] [--unique-system]
[--honour-retry-after] --out FILE``

``streams`` closed-loop premium clients send, for ``duration_s``, chat requests whose system
prompt is the same ``system_sentences`` sentences (about 10 tokens each) and whose user question
differs, each with ``max_tokens`` 16. With ``--unique-system`` every system prompt starts with a
line of its own, so no two prompts share a prefix block and every one is prefilled in full (cold
prompts: how the gateway copes when the engine is slower than predicted). A client sends its next
request as soon as the last one ended, whatever its outcome: a refusal's Retry-After is not
honoured (the worst case for the gateway) unless ``--honour-retry-after``.
The report counts the outcomes (HTTP status and error code), the TTFT of the answered ones (to
their first generated text) and how many met premium's ``ttft_slo_s``, and what the chat engine
prefilled against what its prefix cache reused (its step counters), and what the gateway learned a
prompt costs the engine (``gateway_prefill_costs``: speed and fixed cost per worker and model, from
its ``/metrics`` at the end; ``scheduling.prediction.prefill_cost``).
Run it under ``flock /tmp/shunter-integration.lock`` on a shared host.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from prometheus_client.parser import text_string_to_metric_families

from bench.chat import GatewayChat
from bench.clients import BadResponse, RefusedResponse
from bench.harness import BENCH_RESULTS, bench_stack, private_stack_options
from bench.record import command_line
from bench.triton_stats import engine_busy, engine_counters

app = typer.Typer(add_completion=False)
SENTENCE = "You are a careful assistant for a railway company."
PREMIUM_KEY = "demo-premium-key"
PREMIUM_TTFT_S = 4.0  # config/scheduling.yaml: premium's ttft_s


async def _one(http: httpx.AsyncClient, system: str, user: str, max_tokens: int) -> tuple[str, float | None, float]:
    """One streamed request: (outcome, seconds to its first generated text or None, the
    refusal's Retry-After in seconds or 0)."""
    try:
        timing = await GatewayChat(http, idle_timeout_s=60.0, user=user, max_tokens=max_tokens, system=system).stream()
    except RefusedResponse as refused:
        return f"http {refused.status} {refused.code}", None, refused.retry_after_s or 0.0
    except BadResponse:
        return "error in stream", None, 0.0
    except httpx.HTTPError as exc:
        return type(exc).__name__, None, 0.0
    return "ok", timing.ttft_ms / 1000.0, 0.0


async def _client(http: httpx.AsyncClient, number: int, system: str, max_tokens: int, stop_at: float,
                  results: list[tuple[str, float | None]], unique_system: bool = False,
                  honour_retry_after: bool = False) -> None:
    sent = 0
    while time.perf_counter() < stop_at:
        user = f"Question {number}-{sent}: what is {number} plus {sent}?"
        own_system = f"Conversation {number}-{sent}. {system}" if unique_system else system
        sent += 1
        outcome, ttft_s, retry_after_s = await _one(http, own_system, user, max_tokens)
        results.append((outcome, ttft_s))
        if honour_retry_after and retry_after_s > 0:
            await asyncio.sleep(min(retry_after_s, max(0.0, stop_at - time.perf_counter())))


def summarize(results: list[tuple[str, float | None]], grown: dict[str, float] | None,
              ttft_slo_s: float = PREMIUM_TTFT_S) -> dict[str, Any]:
    """Outcome counts, TTFT percentiles of the answered requests and how many were within
    ``ttft_slo_s``, and the engine's prompt work."""
    ttfts = sorted(t for outcome, t in results if outcome == "ok" and t is not None)
    figures: dict[str, Any] = {"outcomes": dict(Counter(outcome for outcome, _ in results)),
                               "ttft_p50_s": statistics.median(ttfts) if ttfts else None,
                               "ttft_max_s": ttfts[-1] if ttfts else None,
                               "within_ttft": sum(t <= ttft_slo_s for t in ttfts)}
    if grown is not None:
        figures["engine_prefill_tokens"] = grown["prefill_tokens"]
        figures["engine_prefix_hit_tokens"] = grown["prefix_hit_tokens"]
    return figures


async def gateway_prefill_costs(http: httpx.AsyncClient) -> dict[str, dict[str, float]]:
    """``{"worker/model": {"tokens_per_s": ..., "overhead_s": ...}}`` from the gateway's metrics
    (empty if they cannot be read)."""
    names = {"shunter_worker_prefill_tokens_per_second": "tokens_per_s",
             "shunter_worker_prefill_overhead_seconds": "overhead_s"}
    try:
        text = (await http.get("/metrics")).text
        families = list(text_string_to_metric_families(text))
    except (httpx.HTTPError, ValueError):
        return {}
    costs: dict[str, dict[str, float]] = {}
    for family in families:
        for sample in family.samples:
            if sample.name in names:
                key = f"{sample.labels['worker']}/{sample.labels['model']}"
                costs.setdefault(key, {})[names[sample.name]] = sample.value
    return costs


async def _measure(url: str, metrics: str | None, streams: int, duration_s: float, system: str,
                   max_tokens: int, unique_system: bool, honour_retry_after: bool) -> dict[str, Any]:
    before = await engine_counters(metrics) if metrics else None
    results: list[tuple[str, float | None]] = []
    async with httpx.AsyncClient(base_url=url, timeout=120.0, headers={"Authorization": f"Bearer {PREMIUM_KEY}"},
                                 limits=httpx.Limits(max_connections=streams + 4)) as http:
        stop_at = time.perf_counter() + duration_s
        await asyncio.gather(*(_client(http, n, system, max_tokens, stop_at, results, unique_system,
                                       honour_retry_after) for n in range(streams)))
        learned = await gateway_prefill_costs(http)
    after = await engine_counters(metrics) if metrics else None
    return {**summarize(results, engine_busy(before, after)), "gateway_prefill_costs": learned}


@app.command()
def main(out: Annotated[Path, typer.Option(help="JSON report.")] = BENCH_RESULTS / "shared_prefix.json",
         scheduling: Annotated[Path | None, typer.Option(exists=True, dir_okay=False,
                                                         help="scheduling.yaml instead of the shipped one.")] = None,
         streams: Annotated[int, typer.Option(min=1, max=64)] = 8,
         duration_s: Annotated[float, typer.Option(min=1.0, max=600.0)] = 40.0,
         system_sentences: Annotated[int, typer.Option(min=1, max=300)] = 100,
         max_tokens: Annotated[int, typer.Option(min=1, max=256)] = 16,
         unique_system: Annotated[bool, typer.Option(help="A system prompt of its own per request.")] = False,
         honour_retry_after: Annotated[bool, typer.Option(
             help="Wait a refusal's Retry-After before the next request.")] = False) -> None:
    """See the module docstring."""
    system = " ".join([SENTENCE] * system_sentences)
    with private_stack_options(scheduling_file=scheduling) as options, \
            bench_stack(options, log=lambda _: None) as endpoints:
        figures = asyncio.run(_measure(endpoints.gateway_url, endpoints.triton_metrics, streams, duration_s,
                                       system, max_tokens, unique_system, honour_retry_after))
    result = {"command": command_line(), "scheduling": str(scheduling or "shipped"), **figures}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))

