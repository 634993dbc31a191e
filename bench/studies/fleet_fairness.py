"""Fair share across gateways, measured: the real scheduling core and the real ``FairShareSync``
(over the embedded state store, the contract Redis passes too) in virtual time.

Two gateways, each with one worker that serves one request at a time (``SERVICE_S`` each, every
request the same cost). Tenant ``a`` sends only to gateway 1; tenant ``b`` to both. Both always
have work queued. Without shared counters gateway 1 splits its worker between them and gateway 2
serves only ``b``: ``a`` gets a quarter of the fleet's service. With the counters shared every
``interval_s``, gateway 1 sees the service ``b`` gets on gateway 2 and gives its worker to ``a``:
each gets half. One gateway with both workers is the reference.

Reported per configuration: ``a``'s share of all service, and the largest gap between the two
tenants' weighted service at any moment after the first second. One gateway's bound is the
largest single charge (one request here); shared counters add at most what the whole fleet serves
in one sync interval (here two workers x interval / ``SERVICE_S`` requests). Without the lift
grace (``FairQueue.lift_grace_s``) sharing changes nothing: ``a``'s queue empties between its
requests, and each return lifts it to ``b``'s counter, which holds ``b``'s service elsewhere.
Deterministic: no clock, no randomness.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from itertools import count
from pathlib import Path
from typing import Annotated

import typer

from gateway.fair_share import FairShareSync
from gateway.state_store.embedded import EmbeddedStateStore
from scheduling.capacity import CapacityProfile
from scheduling.requests import Request, RequestKind
from scheduling.scheduler import Scheduler, SchedulerConfig, build_scheduler
from scheduling.tenants import Tenant, Tier
from scheduling.workers import ModelLimits, WorkerView

SERVICE_S = 0.01  # one request on one worker
PREFILL_TOKENS = 100
STEP_S = SERVICE_S
PROFILE = CapacityProfile("cpu", memory_gib=8, max_batch_tokens=100_000, max_context_tokens=4096,
                          prefill_tokens_per_s=1e6, decode_tokens_per_s=1e6, cost_per_hour=1.0)
LIMITS = {"m": ModelLimits("m", RequestKind.BATCHED, max_batch_size=1, instances=1, rows_per_instance=1)}
TENANTS = {name: Tenant(name, Tier.STANDARD) for name in ("a", "b")}

app = typer.Typer(add_completion=False)


@dataclass(frozen=True)
class FairnessResult:
    setup: str
    interval_s: float | None
    lift_grace_s: float
    share_a: float  # of all service; 0.5 is fair
    max_gap_requests: float  # largest gap between the tenants' weighted service, in requests


@dataclass
class _Gateway:
    scheduler: Scheduler
    senders: tuple[str, ...]
    running: dict[str, tuple[str, float]]  # worker id -> (request id, ends at)


def _gateway(workers: int, senders: tuple[str, ...], name: str, lift_grace_s: float) -> _Gateway:
    scheduler = build_scheduler(SchedulerConfig(lift_grace_s=lift_grace_s), LIMITS)
    scheduler.update_workers([WorkerView(f"{name}-w{i}", "pool", "local", PROFILE, {"m": frozenset({1})})
                              for i in range(workers)])
    return _Gateway(scheduler, senders, {})


def _keep_backlogged(gateway: _Gateway, now: float, ids: count[int]) -> None:
    queued = {r.tenant.name for r in gateway.scheduler.queue.queued()}
    for tenant in gateway.senders:
        if tenant not in queued:
            for _ in range(2):
                request = Request(f"r{next(ids)}", TENANTS[tenant], "m", RequestKind.BATCHED, now, now + 3600,
                                  prefill_tokens=PREFILL_TOKENS)
                gateway.scheduler.submit(request, now)


def _step(gateway: _Gateway, now: float, served: dict[str, int]) -> None:
    for worker, (request_id, ends_at) in list(gateway.running.items()):
        if ends_at <= now + 1e-9:
            flight = gateway.scheduler.complete(request_id, now)
            if flight is not None:
                served[flight.request.tenant.name] += 1
            del gateway.running[worker]
    for dispatch in gateway.scheduler.schedule(now).dispatches:
        gateway.running[dispatch.worker_id] = (dispatch.request_id, now + SERVICE_S)


async def run(setup: str, interval_s: float | None, lift_grace_s: float = 0.0,
              duration_s: float = 30.0) -> FairnessResult:
    """``setup``: ``one`` (one gateway, two workers) or ``two`` (a on gateway 1, b on both)."""
    gateways = ([_gateway(2, ("a", "b"), "g", lift_grace_s)] if setup == "one"
                else [_gateway(1, ("a", "b"), "g1", lift_grace_s), _gateway(1, ("b",), "g2", lift_grace_s)])
    store = EmbeddedStateStore()
    syncs = [FairShareSync(g.scheduler, store, f"g{i}") for i, g in enumerate(gateways)]
    served, ids, max_gap = {"a": 0, "b": 0}, count(), 0.0
    steps, every = int(duration_s / STEP_S), None if interval_s is None else max(1, round(interval_s / STEP_S))
    for step in range(steps):
        now = step * STEP_S
        for gateway in gateways:
            _keep_backlogged(gateway, now, ids)
            _step(gateway, now, served)
        if every is not None and step % every == 0:
            for sync in syncs:
                await sync.sync()
        if now >= 1.0:
            max_gap = max(max_gap, abs(served["a"] - served["b"]))
    total = served["a"] + served["b"]
    return FairnessResult(setup, interval_s, lift_grace_s, served["a"] / total if total else 0.0, float(max_gap))


@app.command()
def main(intervals: Annotated[str, typer.Option(help="sync intervals in seconds, comma-separated")] = "0.05,0.2,1",
         lift_grace_s: Annotated[float, typer.Option(help="the lift grace of the shared runs")] = 2.0,
         out: Annotated[Path, typer.Option(help="JSON report")] = Path("bench/results/fleet_fairness.json")) -> None:
    """Tenant a's share of service and the largest service gap: one gateway, two without shared
    counters, two sharing them without a lift grace, and two sharing them every INTERVAL with it."""
    configs: list[tuple[str, float | None, float]] = [("one", None, 0.0), ("two", None, 0.0), ("two", 0.2, 0.0)]
    configs += [("two", float(x), lift_grace_s) for x in intervals.split(",")]
    results = [asyncio.run(run(setup, interval, grace)) for setup, interval, grace in configs]
    for r in results:
        shared = "not shared" if r.interval_s is None else f"shared every {r.interval_s:g} s"
        label = "one gateway" if r.setup == "one" else f"two gateways, {shared}, lift grace {r.lift_grace_s:g} s"
        print(f"{label:52s} a's share {r.share_a:.3f}   largest gap {r.max_gap_requests:.0f} requests")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([asdict(r) for r in results], indent=1))
