"""Chaos: mixed load from three tiers while Triton workers are SIGKILLed every minute and a gateway once.

``python -m bench chaos [--duration-s 300] [--kill-every-s 60] [--workers 2] [--gateways 2]``

A private stack: one pool of ``--workers`` Triton workers (chat, embed, rerank, tabular),
``--gateways`` gateway processes on one port sharing a Redis state store (started by the stack),
tenant quotas lifted. First each greedy prompt is streamed once, undisturbed: its text is the
reference. Then, for ``--duration-s``, closed-loop clients send greedy chat streams (premium and
standard), embeddings (all three tiers), rerank (standard) and KServe tabular (batch), each with
``X-Deadline-Ms``; every ``--kill-every-s`` one worker (in turn) gets SIGKILL, and at
``--gateway-kill-at-s`` (default: the middle of the run plus a quarter interval) gateway 0 does.
A client whose connection drops does what a client of this API should: a non-streamed request is
sent again (it has no side effect), a stream reconnects with ``Last-Event-ID`` to whichever
gateway answers, up to ``MAX_RECONNECTS`` times.

Counted (``bench.chaos_tally``): every request's one outcome; non-streamed success and completed
streams (targets >= 99 %); each greedy stream's text against the reference (target: identical);
requests past their deadline (a non-streamed answer, or a stream's first event, later than the
deadline plus ``SLACK_S``; target: none); for each kill, the seconds until the worker's Triton
answers ready and until the gateway sees it ready, and the gateway's restart time. Report: JSON
on stdout and in ``--out``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml

from bench.chaos_tally import STREAM, Ending, Tally, targets
from bench.harness import BENCH_RESULTS, private_stack_options, write_config
from bench.record import command_line, log, machine_facts
from control.stack import Listen, LocalStack, free_port, load_config
from settings.paths import PROJECT_ROOT, StackPaths
from settings.workers import worker_addresses

app = typer.Typer(add_completion=False)
KEYS = {"premium": "demo-premium-key", "standard": "demo-standard-key", "batch": "demo-batch-key"}
PROMPTS = ("Write a short poem about the sea.", "Explain what a lighthouse does.",
           "Name three colours and one fruit.", "What is the capital of France? Answer in a sentence.")
MAX_TOKENS = 32
DEADLINE_MS = 20_000
SLACK_S = 5.0
MAX_RECONNECTS = 5
RECONNECT_PAUSE_S = 0.5
STATUS_OUTCOME = {429: "rejected", 503: "rejected", 504: "expired"}


def _outcome(response: httpx.Response) -> str:
    if response.status_code == 200:
        return "completed"
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = f"http_{response.status_code}"
    if code == "worker_failed" or (response.status_code >= 500 and response.status_code not in STATUS_OUTCOME):
        return f"failed({code})"
    kind = STATUS_OUTCOME.get(response.status_code, "rejected")
    return kind if kind == "expired" else f"{kind}({code})"


def _chat_body(prompt: str) -> dict[str, Any]:
    return {"model": "chat", "messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": True}


async def stream_once(client: httpx.AsyncClient, prompt: str, headers: dict[str, str]) -> tuple[str, str, int, float]:
    """One greedy stream, reconnecting with Last-Event-ID when the connection drops: (outcome,
    text, reconnects, seconds to its first event)."""
    text: list[str] = []
    last_id, first_s, started = "", -1.0, time.monotonic()
    for reconnects in range(MAX_RECONNECTS + 1):
        resume = {"Last-Event-ID": last_id} if last_id else {}
        try:
            async with client.stream("POST", "/v1/chat/completions", json=_chat_body(prompt),
                                     headers={**headers, **resume}) as response:
                if response.status_code != 200:
                    await response.aread()
                    if resume and response.status_code == 503:  # a reconnect told to come back shortly
                        await asyncio.sleep(float(response.headers.get("retry-after", "1")))
                        continue
                    return _outcome(response), "".join(text), reconnects, first_s
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        last_id = line[4:]
                    elif line.startswith("data: "):
                        first_s = first_s if first_s >= 0 else time.monotonic() - started
                        data = line[6:]
                        if data == "[DONE]":
                            return "completed", "".join(text), reconnects, first_s
                        chunk = json.loads(data)
                        if "error" in chunk:
                            return f"failed({chunk['error']['code']})", "".join(text), reconnects, first_s
                        text.extend(c["delta"].get("content", "") for c in chunk["choices"])
        except httpx.TransportError:
            pass
        await asyncio.sleep(RECONNECT_PAUSE_S)
    return "lost", "".join(text), MAX_RECONNECTS, first_s


async def send_once(client: httpx.AsyncClient, path: str, body: dict[str, Any],
                    headers: dict[str, str]) -> tuple[str, int]:
    """One non-streamed request, sent again when the connection drops: (outcome, resends)."""
    for resends in range(MAX_RECONNECTS + 1):
        try:
            return _outcome(await client.post(path, json=body, headers=headers)), resends
        except httpx.TransportError:
            await asyncio.sleep(RECONNECT_PAUSE_S)
    return "lost", MAX_RECONNECTS


NON_STREAMED: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "embeddings": ("/v1/embeddings", {"model": "embed", "input": ["a lighthouse on a cliff", "the sea"]},
                   ("premium", "standard", "batch")),
    "rerank": ("/v1/rerank", {"model": "rerank", "query": "capital of France?",
                              "documents": ["Paris is the capital of France.", "Bananas are yellow."]},
               ("standard",)),
    "tabular": ("/v2/models/tabular/infer",
                {"inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 64], "data": [1.0] * 128}]},
                ("batch",)),
}


async def client_loop(url: str, kind: str, index: int, until_s: float, tally: Tally,
                      reference: dict[str, str], think_s: float) -> None:
    """One closed-loop client of ``kind`` until ``until_s`` (monotonic)."""
    deadline = {"X-Deadline-Ms": str(DEADLINE_MS)}
    async with httpx.AsyncClient(base_url=url, timeout=120.0) as client:
        n = index
        while time.monotonic() < until_s:
            n += 1
            started = time.monotonic()
            tally.start(kind)
            if kind == STREAM:
                tier = ("premium", "standard")[n % 2]
                prompt = PROMPTS[n % len(PROMPTS)]
                headers = {"Authorization": f"Bearer {KEYS[tier]}", **deadline}
                outcome, text, again, first_s = await stream_once(client, prompt, headers)
                identical = text == reference[prompt] if outcome == "completed" else None
                tally.end(Ending(kind, outcome, time.monotonic() - started, first_s > DEADLINE_MS / 1000 + SLACK_S,
                                 identical, again))
            else:
                path, body, tiers = NON_STREAMED[kind]
                headers = {"Authorization": f"Bearer {KEYS[tiers[n % len(tiers)]]}", **deadline}
                outcome, again = await send_once(client, path, body, headers)
                latency_s = time.monotonic() - started
                tally.end(Ending(kind, outcome, latency_s, latency_s > DEADLINE_MS / 1000 + SLACK_S, None, again))
            await asyncio.sleep(think_s)


def _until(condition: Callable[[], bool], timeout_s: float, every_s: float = 0.05) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if condition():
            return round(time.monotonic() - start, 3)
        time.sleep(every_s)
    return None


def _triton_ready(http_port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _gateway_sees(url: str, worker: str) -> bool:
    try:
        text = httpx.get(f"{url}/metrics", timeout=2).text
    except httpx.HTTPError:
        return False
    lines = [line for line in text.splitlines()
             if line.startswith("shunter_worker_model_ready{") and f'worker="{worker}"' in line]
    return bool(lines) and all(line.endswith(" 1.0") for line in lines)


def kill_worker(stack: LocalStack, index: int, gateway_url: str) -> dict[str, Any]:
    """SIGKILL worker ``index``; seconds until its Triton and the gateway see it ready again."""
    assert stack.supervisor is not None
    worker = stack.supervisor.workers[index]
    assert worker.process is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    killed_s = time.monotonic()
    triton_s = _until(lambda: _triton_ready(worker.address.http_port), 300)
    gateway_s = _until(lambda: _gateway_sees(gateway_url, worker.address.name), 60)
    return {"worker": worker.address.name, "triton_ready_s": triton_s,
            "gateway_ready_s": round(time.monotonic() - killed_s, 3) if gateway_s is not None else None}


def kill_gateway(stack: LocalStack) -> dict[str, Any]:
    supervisor = stack.gateway_supervisor
    assert supervisor is not None
    before = supervisor.restarts()[0]
    supervisor.processes[0].send_signal(signal.SIGKILL)
    return {"gateway": 0, "restarted_ready_s": _until(lambda: supervisor.restarts()[0] > before, 120)}


async def chaos_schedule(stack: LocalStack, url: str, duration_s: float, kill_every_s: float,
                         gateway_kill_at_s: float, workers: int) -> list[dict[str, Any]]:
    """Kill a worker every ``kill_every_s`` (in turn) and gateway 0 once; the measured recoveries."""
    events: list[dict[str, Any]] = []
    start = time.monotonic()
    plan = [(t, "worker") for t in _times(kill_every_s, duration_s)] + [(gateway_kill_at_s, "gateway")]
    for at_s, what in sorted(plan):
        await asyncio.sleep(max(0.0, start + at_s - time.monotonic()))
        log(f"chaos: killing {what} at {at_s:.0f} s")
        if what == "worker":
            index = sum(1 for e in events if "worker" in e) % workers
            result = await asyncio.to_thread(kill_worker, stack, index, url)
        else:
            result = await asyncio.to_thread(kill_gateway, stack)
        events.append({"at_s": round(at_s, 1), **result})
        log(f"chaos: {events[-1]}")
    return events


def _times(every_s: float, duration_s: float) -> list[float]:
    return [every_s * k for k in range(1, int(duration_s // every_s) + 1) if every_s * k < duration_s]


async def reference_texts(url: str) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=url, timeout=120.0) as client:
        texts = {}
        for prompt in PROMPTS:
            outcome, text, _, _ = await stream_once(client, prompt, {"Authorization": f"Bearer {KEYS['premium']}"})
            if outcome != "completed":
                raise RuntimeError(f"the undisturbed reference stream for {prompt!r} ended {outcome}")
            texts[prompt] = text
        return texts


async def run_load(stack: LocalStack, url: str, duration_s: float, kill_every_s: float, gateway_kill_at_s: float,
                   workers: int, clients: dict[str, int]) -> dict[str, Any]:
    reference = await reference_texts(url)
    tally = Tally()
    until_s = time.monotonic() + duration_s
    loops = [client_loop(url, kind, i, until_s, tally, reference, 0.2 if kind == STREAM else 0.1)
             for kind, count in clients.items() for i in range(count)]
    chaos = asyncio.create_task(chaos_schedule(stack, url, duration_s, kill_every_s, gateway_kill_at_s, workers))
    await asyncio.gather(*loops)
    events = await chaos
    report = tally.report()
    return {**report, "targets": targets(report), "kills": events}


def _stack_paths(options_dir: Path, state_dir: Path, repository: Path, base_port: int, workers: int,
                 redis_port: int) -> StackPaths:
    write_config(PROJECT_ROOT / "config", options_dir, base_port, state_store=f"redis://127.0.0.1:{redis_port}/0",
                 models=("chat", "embed", "rerank", "tabular"))
    pools = yaml.safe_load((options_dir / "pools.yaml").read_text())
    pools["pools"][0]["workers"] = workers
    (options_dir / "pools.yaml").write_text(yaml.safe_dump(pools, sort_keys=False))
    return StackPaths(config_dir=options_dir, state_dir=state_dir, repository=repository)


@app.command()
def main(
    duration_s: Annotated[float, typer.Option(help="seconds of load under chaos")] = 300.0,
    kill_every_s: Annotated[float, typer.Option(help="a worker is SIGKILLed this often")] = 60.0,
    gateway_kill_at_s: Annotated[float | None, typer.Option(help="when gateway 0 is SIGKILLed")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Triton workers in the pool")] = 2,
    gateways: Annotated[int, typer.Option(min=1, help="gateway processes (Redis state store)")] = 2,
    streams: Annotated[int, typer.Option(help="closed-loop greedy chat stream clients")] = 2,
    base_port: Annotated[int, typer.Option(help="first worker port")] = 19100,
    gateway_port: Annotated[int, typer.Option()] = 19080,
    control_port: Annotated[int, typer.Option()] = 19081,
    out: Annotated[Path, typer.Option(help="JSON report")] = BENCH_RESULTS / "chaos.json",
) -> None:
    """Run the chaos benchmark; see the module docstring."""
    gateway_kill_at_s = gateway_kill_at_s if gateway_kill_at_s is not None else duration_s / 2 + kill_every_s / 4
    clients = {STREAM: streams, "embeddings": 2, "rerank": 1, "tabular": 1}
    with private_stack_options() as options:
        paths = _stack_paths(options.config_dir, options.state_dir, options.repository, base_port, workers,
                             free_port())
        stack = LocalStack(paths, Listen(gateway_port=gateway_port, control_port=control_port, gateways=gateways))
        log(f"starting the chaos stack: {workers} workers, {gateways} gateways")
        configured = [a.name for a in worker_addresses(load_config(paths))]
        stack.start(log=log)
        try:
            url = f"http://127.0.0.1:{gateway_port}"
            result = asyncio.run(run_load(stack, url, duration_s, kill_every_s, gateway_kill_at_s, workers, clients))
        finally:
            stack.stop()
    report = {"command": command_line(), "machine": machine_facts(), "duration_s": duration_s,
              "kill_every_s": kill_every_s, "workers": workers, "gateways": gateways, "clients": clients,
              "workers_configured": configured, **result}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
