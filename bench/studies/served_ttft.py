"""The served time to first token of single requests on the CPU chat model, against the engine alone.

It fits the simulator's served path (``simulator.served_path``): a fixed latency and the served
prefill cost. ``bench.studies.fit_cpu_worker`` times the engine's steps alone;
``bench.studies.served_cost`` adds what decoding costs when served. This study measures what a
request's first token costs when served, on its own workload (never the replay trace): single
requests on an idle private stack (``bench.harness``), one at a time, of several templated prompt
lengths (``--lengths``; each prompt's system line is unique, so the engine's prefix cache never
hits), ``--repeats`` of each in a seeded shuffled order. For each it records the client's time to
the first chunk with text (as ``bench.studies.replay`` takes it), the gateway's own view from its
``/metrics`` (``shunter_time_to_first_token_seconds``: admission to the first text chunk at the
gateway; ``shunter_queue_wait_seconds``: admission to dispatch; the probes' tier only) and how
much CPU other processes took meanwhile (``bench.contention``). Then the same again for
``--loaded-lengths`` while ``--background-streams`` closed-loop clients of another tenant stream
long generations (the loaded probes: a check of the fitted worker under load, not an input of the
terms).

    flock /tmp/shunter-integration.lock python -m bench studies.served_ttft measure  # docs/sim/served_path.json
    python -m bench studies.served_ttft derive                                        # the profile's served entry

``derive`` (``served_path_terms``) compares each idle client TTFT with the fitted law's prefill
of the same prompt, split into the per-step overhead and the prefill work (``FittedPerf``), and
fits ``ttft - overhead = path_s + factor * work`` by least squares over the quiet samples. The
factor is kept only when its 95 % interval excludes 1 (the data say the served prefill differs
from the engine alone); otherwise it is 1 and ``path_s`` is the median of ``ttft - prefill``. It
writes ``path_s`` (``simulator.served_path``) and ``prefill_factor``
(``FittedPerf.served_prefill_factor``) into the profile's ``served`` entry, the fit under
``path_fit``, and there under ``loaded_check`` the loaded probes' median TTFT against the fitted
worker's with every served term (``loaded_check``). Measure the law, the decode term and these
terms on the same occasion: the machine's speed drifts by several per cent from day to day.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import numpy as np
import typer
from prometheus_client.parser import text_string_to_metric_families

from bench.chat import GatewayChat
from bench.clients import gateway_http
from bench.contention import CpuWatch, wait_for_quiet
from bench.cpu import check_same_isolation, isolation_entry
from bench.harness import BENCH_RESULTS, IsolateEngine, StackOptions, bench_stack, isolation_if
from bench.record import command_line
from bench.studies.fidelity_trace import API_KEYS, fit_messages, warm_up_item
from bench.studies.replay import send_one, warm_up
from bench.workload import CHAT_SYSTEM
from gateway.tokenization import LlmTokenizer
from scheduling.requests import Request, RequestKind
from scheduling.tenants import Tenant, Tier
from settings.paths import PROJECT_ROOT, StackPaths
from simulator.engine import ARRIVAL, EventLoop
from simulator.llm_worker import LlmWorker
from simulator.llm_worker import Sequence as SimSequence
from simulator.perf.fitted import FittedPerf
from simulator.perf.protocol import IterationWork
from simulator.served_path import ServedPath

app = typer.Typer(add_completion=False, no_args_is_help=True)
OUT = Path("docs/sim")
# Prompt lengths (tokens, as the gateway counts the templated prompt): 29 is the template's shortest;
# 63 is one engine step (the chat engine's 63-token chunk), 64 two; 700 is near the trace's longest (682).
LENGTHS = "29,48,63,64,128,256,448,700"
LOADED_LENGTHS = "29,48,63,66,128"  # the trace's median request is 66 tokens; longer ones mix chunks with decodes
PROBE_MAX_TOKENS = 4  # enough for a first text chunk; the first token may be held back (stop-string prefix)
TENANT, PROBE_TIER = "demo-standard", "standard"  # the gateway's per-tier histograms hold only the probes
BACKGROUND_TENANT = "demo-batch"  # the loaded probes' background streams: another tier
BACKGROUND_USER = "Write a very long, detailed story about a lighthouse keeper and a storm."  # bench.continuous's
BACKGROUND_MAX_TOKENS = 256
BACKGROUND_SETTLE_S = 3.0  # background streams start decoding before the loaded probes
GAP_S = 0.3  # pause between probes: the engine and its sender thread turn idle
QUIET_SHARE = 0.10  # others' share of the cores above which a probe is left out of the fit
Z_95 = 1.96  # normal 95 % quantile for the factor's interval (n >= 30 samples by default)
MIN_SAMPLES = 10  # fewer quiet samples than this: refuse to derive
LOADED_PHASES = 10  # simulated arrival points per background decode step


@dataclass(frozen=True)
class PathProbe:
    """One idle request: its prompt tokens, the client's TTFT, the gateway's TTFT and queue wait
    (from its metrics; None when it could not be read), and others' share of the cores meanwhile."""

    request_id: str
    prompt_tokens: int
    status: int
    ttft_s: float | None
    gateway_ttft_s: float | None
    gateway_queue_s: float | None
    completion_tokens: int
    others_share: float


def probe_items(tokenizer: LlmTokenizer, lengths: Sequence[int], repeats: int, seed: int) -> list[dict[str, Any]]:
    """Chat requests, ``repeats`` rounds of every length in a shuffled order; each id leads its
    system line, so no two prompts share a 16-token KV block (``fit_messages``)."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for round_index in range(repeats):
        order = list(lengths)
        rng.shuffle(order)
        for length in order:
            request_id = f"{len(items):03d}-probe-{length}"
            messages, tokens = fit_messages(tokenizer, request_id, length, rng)
            items.append({"request_id": request_id, "tenant": TENANT, "arrival_s": 0.0, "round": round_index,
                          "target_prompt_tokens": length, "prompt_tokens": tokens,
                          "max_tokens": PROBE_MAX_TOKENS, "messages": messages})
    return items


def gateway_sums(metrics_text: str, tier: str = PROBE_TIER) -> dict[str, float]:
    """The sums of the chat model's TTFT and queue-wait histograms of one tier."""
    wanted = {"shunter_time_to_first_token_seconds_sum": "ttft_s",
              "shunter_queue_wait_seconds_sum": "queue_s"}
    sums = dict.fromkeys(wanted.values(), 0.0)
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name in wanted and sample.labels.get("model") == "chat" and sample.labels.get("tier") == tier:
                sums[wanted[sample.name]] += sample.value
    return sums


async def _probe(http: httpx.AsyncClient, item: dict[str, Any]) -> PathProbe:
    before = gateway_sums((await http.get("/metrics")).text)
    watch = CpuWatch([])
    result = await send_one(http, item, 0.0, 120.0)
    share = watch.stop()["others_share"]
    after = gateway_sums((await http.get("/metrics")).text)
    ok = result.status == 200
    return PathProbe(item["request_id"], item["prompt_tokens"], result.status, result.ttft_s,
                     after["ttft_s"] - before["ttft_s"] if ok else None,
                     after["queue_s"] - before["queue_s"] if ok else None, result.completion_tokens, share)


async def _probe_all(gateway_url: str, items: list[dict[str, Any]], background_streams: int = 0) -> list[PathProbe]:
    """The probes one after another; with ``background_streams``, while that many closed-loop
    clients (another tenant) stream long generations, started ``BACKGROUND_SETTLE_S`` before."""
    probes = []
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120.0) as http, \
            gateway_http(gateway_url, API_KEYS[BACKGROUND_TENANT], timeout_s=120.0) as background_http:
        chat = GatewayChat(background_http, idle_timeout_s=60.0, user=BACKGROUND_USER,
                           max_tokens=BACKGROUND_MAX_TOKENS)
        stop = asyncio.Event()

        async def background() -> None:
            while not stop.is_set():
                with contextlib.suppress(Exception):  # a failed generation: the next one starts
                    await chat.stream()

        tasks = [asyncio.create_task(background()) for _ in range(background_streams)]
        try:
            await asyncio.sleep(BACKGROUND_SETTLE_S if tasks else 0.0)
            for item in items:
                probes.append(await _probe(http, item))
                await asyncio.sleep(GAP_S)
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return probes


Lengths = Annotated[str, typer.Option(help="comma-separated prompt lengths (tokens)")]


@app.command()
def measure(out: Annotated[Path, typer.Option(help="raw measurements JSON")] = OUT / "served_path.json",
            lengths: Lengths = LENGTHS, repeats: int = 5, seed: int = 0,
            base_port: int = 29300, max_quiet_wait_s: float = 300.0,
            background_streams: Annotated[int, typer.Option(help="loaded probes: background streams")] = 4,
            loaded_lengths: Lengths = LOADED_LENGTHS, isolate_engine: IsolateEngine = False) -> None:
    """Idle single requests through a private real stack, then the loaded ones (hold the lock)."""
    isolation = isolation_if(isolate_engine)
    tokenizer = LlmTokenizer(StackPaths().artifacts / "chat" / "model.gguf")
    items = probe_items(tokenizer, [int(v) for v in lengths.split(",")], repeats, seed)
    loaded = [{**item, "request_id": f"L{item['request_id']}"} for item in  # ids unlike the idle ones
              probe_items(tokenizer, [int(v) for v in loaded_lengths.split(",")], repeats, seed + 1)]
    options = StackOptions(gateway_port=base_port + 80, control_port=base_port + 81, base_port=base_port,
                           config_dir=BENCH_RESULTS / "served_path_config",
                           repository=PROJECT_ROOT / "var" / "served_path_repository", isolation=isolation)
    with bench_stack(options) as endpoints:
        warm = asyncio.run(warm_up(endpoints.gateway_url, warm_up_item(tokenizer, items[0], 64)))
        print(f"warm-up: HTTP {warm.status}, TTFT {warm.ttft_s}")
        quiet = wait_for_quiet(max_quiet_wait_s)
        watch = CpuWatch([])
        probes = asyncio.run(_probe_all(endpoints.gateway_url, items))
        contention = {**watch.stop(), "quiet_wait_s": quiet["waited_s"]}
        loaded_probes = asyncio.run(_probe_all(endpoints.gateway_url, loaded, background_streams)) \
            if background_streams else []
    background_prompt = tokenizer.apply_chat_template([{"role": "system", "content": CHAT_SYSTEM},
                                                       {"role": "user", "content": BACKGROUND_USER}])
    background = {"streams": background_streams, "tenant": BACKGROUND_TENANT, "user": BACKGROUND_USER,
                  "max_tokens": BACKGROUND_MAX_TOKENS, "prompt_tokens": tokenizer.count(background_prompt)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"command": command_line(), "max_tokens": PROBE_MAX_TOKENS, "tenant": TENANT,
                               **isolation_entry(isolation),
                               "contention": contention, "probes": [asdict(p) for p in probes],
                               "background": background, "loaded_probes": [asdict(p) for p in loaded_probes]},
                              indent=1) + "\n")
    print(f"{sum(p.status == 200 for p in probes)} of {len(probes)} probes answered; others {contention}")


def _fit_line(work_s: list[float], target_s: list[float]) -> tuple[float, float, float]:
    """Least squares ``target = intercept + slope * work``: (intercept, slope, slope's standard error)."""
    x, y = np.array(work_s), np.array(target_s)
    design = np.column_stack([np.ones_like(x), x])
    (intercept, slope), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - design @ np.array([intercept, slope])
    spread = float(np.sum((x - x.mean()) ** 2))
    stderr = math.sqrt(float(residual @ residual) / max(1, len(x) - 2) / spread) if spread > 0 else math.inf
    return float(intercept), float(slope), stderr


def served_path_terms(perf: FittedPerf, probes: Sequence[PathProbe],
                      max_others_share: float = QUIET_SHARE) -> dict[str, Any]:
    """The fixed path latency and the served prefill factor (module docstring) from the probes
    answered with a TTFT while others took at most ``max_others_share`` of the cores; raise
    ValueError with fewer than ``MIN_SAMPLES`` of them. ``perf`` is the engine-alone law."""
    kept = [p for p in probes if p.ttft_s is not None and p.others_share <= max_others_share]
    if len(kept) < MIN_SAMPLES:
        raise ValueError(f"{len(kept)} quiet answered probes; need {MIN_SAMPLES}")
    parts = [perf.prefill_split_s(p.prompt_tokens) for p in kept]
    ttft = [p.ttft_s or 0.0 for p in kept]
    above_overhead = [t - overhead for t, (overhead, _) in zip(ttft, parts, strict=True)]
    intercept, slope, stderr = _fit_line([work for _, work in parts], above_overhead)
    factor_differs = abs(slope - 1.0) > Z_95 * stderr
    extra = [t - o - w for t, (o, w) in zip(ttft, parts, strict=True)]
    path_s = intercept if factor_differs else statistics.median(extra)
    return {"path_s": max(0.0, path_s), "prefill_factor": slope if factor_differs else 1.0,
            "fit": {"intercept_s": intercept, "factor": slope, "factor_stderr": stderr,
                    "factor_differs_from_1": factor_differs, "samples": len(kept), "left_out": len(probes) - len(kept),
                    "median_extra_over_law_s": statistics.median(extra)},
            "by_length": _by_length(perf, kept)}


def _by_length(perf: FittedPerf, probes: Sequence[PathProbe]) -> dict[str, dict[str, float | None]]:
    """Per prompt length: medians of the client TTFT, the gateway's TTFT and queue wait, and the law."""
    rows: dict[str, dict[str, float | None]] = {}
    for tokens in sorted({p.prompt_tokens for p in probes}):
        group = [p for p in probes if p.prompt_tokens == tokens]
        gateway = [p.gateway_ttft_s for p in group if p.gateway_ttft_s is not None]
        queue = [p.gateway_queue_s for p in group if p.gateway_queue_s is not None]
        rows[str(tokens)] = {"samples": len(group), "ttft_s": statistics.median(p.ttft_s or 0.0 for p in group),
                             "gateway_ttft_s": statistics.median(gateway) if gateway else None,
                             "gateway_queue_s": statistics.median(queue) if queue else None,
                             "law_prefill_s": perf.prefill_s(tokens)}
    return rows


class _FirstTokens:
    """A ``WorkerListener`` that keeps first-token times (the background never finishes)."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}

    def first_token(self, request_id: str, now: float) -> None:
        self.first[request_id] = now

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        pass

    def dropped(self, request_id: str, now: float) -> None:
        pass


def simulated_loaded_ttft_s(perf: FittedPerf, path: ServedPath, prompt_tokens: int, background_streams: int,
                            background_context_tokens: int, phases: int = LOADED_PHASES) -> list[float]:
    """The fitted worker's TTFT of one probe arriving while ``background_streams`` sequences
    decode (their prompts of ``background_context_tokens`` arrive at 0 and are prefilled first;
    the probe comes ``BACKGROUND_SETTLE_S`` after that or after the last of them decodes, whichever
    is later, as the real probes come to streams that already decode), at ``phases`` points spread
    over one of their decode steps (the real probe lands anywhere in a step). The real background
    restarts every ``BACKGROUND_MAX_TOKENS`` tokens from a cached prefix; here the sequences'
    context is mid-generation on average instead."""
    step_s = perf.iteration_s(IterationWork((), background_streams, background_streams * background_context_tokens,
                                            background_streams * background_context_tokens))
    tenant = Tenant("probe", Tier.STANDARD)

    def with_background() -> tuple[EventLoop, _FirstTokens, LlmWorker]:
        loop, seen = EventLoop(), _FirstTokens()
        worker = LlmWorker("cpu", perf, loop, path.wrap(seen, loop))
        for index in range(background_streams):
            request = Request(f"b{index}", tenant, "chat", RequestKind.LLM, 0.0, math.inf,
                              prefill_tokens=background_context_tokens)
            worker.enqueue(SimSequence(request, BACKGROUND_MAX_TOKENS))  # still decoding when the probe comes
        return loop, seen, worker

    loop, seen, _ = with_background()
    loop.run(until_s=600.0)
    decoding_s = max(seen.first.values(), default=0.0)
    ttfts = []
    for phase in range(phases):
        loop, seen, worker = with_background()
        arrival_s = max(BACKGROUND_SETTLE_S, decoding_s) + step_s * phase / phases
        probe = SimSequence(Request("probe", tenant, "chat", RequestKind.LLM, arrival_s, math.inf,
                                    prefill_tokens=prompt_tokens), PROBE_MAX_TOKENS)
        loop.at(arrival_s, ARRIVAL, lambda: worker.enqueue(probe))  # noqa: B023 (run before the next phase)
        loop.run(until_s=arrival_s + 60.0)
        ttfts.append(seen.first["probe"] - arrival_s)
    return ttfts


def loaded_check(perf: FittedPerf, path: ServedPath, raw: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per loaded probe length: the real median TTFT (quiet probes) against the fitted worker's
    median over arrival phases (``simulated_loaded_ttft_s``), and their ratio."""
    background = raw["background"]
    context = int(background["prompt_tokens"] + background["max_tokens"] / 2)  # mid-generation, on average
    probes = [PathProbe(**p) for p in raw.get("loaded_probes", [])]
    rows = {}
    for tokens in sorted({p.prompt_tokens for p in probes}):
        real = [p.ttft_s for p in probes if p.prompt_tokens == tokens and p.ttft_s is not None
                and p.others_share <= QUIET_SHARE]
        if not real:
            continue
        sim = statistics.median(simulated_loaded_ttft_s(perf, path, tokens, background["streams"], context))
        rows[str(tokens)] = {"samples": len(real), "real_ttft_s": statistics.median(real), "sim_ttft_s": sim,
                             "sim_over_real": sim / statistics.median(real)}
    return rows


@app.command()
def derive(measured: Annotated[list[Path] | None, typer.Option(help="JSON written by measure (repeatable: "
                                                                     "the idle probes are pooled)")] = None,
           profile: Annotated[Path, typer.Option(help="profile of bench.studies.fit_cpu_worker")] =
           OUT / "cpu_worker_profile.json") -> None:
    """Fit the path terms and write them into the profile's ``served`` entry (the loaded check
    from the last file that has loaded probes)."""
    files = measured or [OUT / "served_path.json"]
    data = json.loads(profile.read_text())
    raws = [json.loads(path.read_text()) for path in files]
    for path, raw_file in zip(files, raws, strict=True):
        check_same_isolation(f"{profile} and {path}", data, raw_file)
    law_only = FittedPerf.from_profile({**data, "served": {}})  # the engine alone
    terms = served_path_terms(law_only, [PathProbe(**p) for raw in raws for p in raw["probes"]])
    served = data.get("served", {})
    served.update({"path_s": terms["path_s"], "prefill_factor": terms["prefill_factor"],
                   "path_fit": {**terms["fit"], "by_length": terms["by_length"], "command": command_line(),
                                "from_measurements": [str(path) for path in files]}})
    raw: dict[str, Any] = next((r for r in reversed(raws) if r.get("loaded_probes")), {})
    if raw:
        served["path_fit"]["loaded_check"] = loaded_check(FittedPerf.from_profile({**data, "served": served}),
                                                          ServedPath.from_profile({"served": served}), raw)
    data["served"] = served
    profile.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: terms[k] for k in ("path_s", "prefill_factor", "fit")}, indent=1))
    print(json.dumps(served["path_fit"].get("loaded_check"), indent=1))

