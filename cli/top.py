"""``shunter top``: a live terminal view of the stack for an operator during an incident.

Every ``--interval`` seconds it reads the gateway's ``/metrics`` and control's ``/metrics`` and
``/admin/v1/workers``, and shows (rich): per model the request rate, errors, in flight, TTFT p95
and queue-wait p95 over the last interval; queues by tier; the busiest tenants by tokens/s;
refusals by reason; the workers and their models; replicas desired vs ready per pool and model
(the capacity controller) and rollouts in progress. Rates and percentiles come from the change
between two readings (``Reading``), as PromQL's ``rate()`` and ``histogram_quantile()`` would.
``render(previous, current, workers)`` is pure, so the view is tested without a terminal.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
import typer
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Group
from rich.table import Table

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Reading:
    """The samples of one scrape (gateway and control together), at ``at_s`` (monotonic)."""

    at_s: float
    samples: Mapping[str, Mapping[Labels, float]] = field(default_factory=dict)

    @staticmethod
    def parse(texts: Iterable[str], at_s: float) -> Reading:
        samples: dict[str, dict[Labels, float]] = defaultdict(dict)
        for text in texts:
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    key = tuple(sorted(sample.labels.items()))
                    series = samples[sample.name]
                    series[key] = series.get(key, 0.0) + sample.value  # several gateways add up
        return Reading(at_s, samples)

    def series(self, name: str) -> Mapping[Labels, float]:
        return self.samples.get(name, {})


Keep = Callable[[Mapping[str, str]], bool]


def _by(reading: Reading, name: str, label: str, keep: Keep | None = None) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for labels, value in reading.series(name).items():
        found = dict(labels)
        if keep is None or keep(found):
            out[found.get(label, "")] += value
    return out


def _rate(previous: Reading | None, current: Reading, name: str, label: str, keep: Keep | None = None
          ) -> dict[str, float]:
    now = _by(current, name, label, keep)
    if previous is None or current.at_s <= previous.at_s:
        return {key: 0.0 for key in now}
    before = _by(previous, name, label, keep)
    seconds = current.at_s - previous.at_s
    return {key: max(0.0, value - before.get(key, 0.0)) / seconds for key, value in now.items()}


def _p95(previous: Reading | None, current: Reading, name: str, label: str) -> dict[str, float | None]:
    """p95 per ``label`` value over the interval (over all time on the first reading)."""
    def buckets(reading: Reading | None) -> dict[str, dict[float, float]]:
        out: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
        for labels, value in (reading.series(f"{name}_bucket") if reading else {}).items():
            found = dict(labels)
            out[found.get(label, "")][float(found["le"])] += value
        return out

    now, before = buckets(current), buckets(previous)
    result: dict[str, float | None] = {}
    for key, bounds in now.items():
        delta = sorted((b, c - before.get(key, {}).get(b, 0.0)) for b, c in bounds.items())
        total = delta[-1][1] if delta else 0.0
        if total <= 0:
            result[key] = None
            continue
        rank = 0.95 * total
        finite = [b for b, _ in delta if not math.isinf(b)]
        result[key] = next((b for b, c in delta if c >= rank and not math.isinf(b)), finite[-1] if finite else None)
    return result


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.2f}{unit}" if value < 100 else f"{value:.0f}{unit}"


def _models(previous: Reading | None, current: Reading) -> Table:
    table = Table(title="Models (last interval)", expand=True)
    for column in ("model", "req/s", "errors/s", "in flight", "TTFT p95 (≤ bucket)", "queue wait p95"):
        table.add_column(column)
    requests = _rate(previous, current, "shunter_requests_total", "model")
    errors = _rate(previous, current, "shunter_requests_total", "model",
                   lambda labels: labels.get("outcome", "") != "completed")
    in_flight = _by(current, "shunter_in_flight_requests", "model")
    ttft = _p95(previous, current, "shunter_time_to_first_token_seconds", "model")
    wait = _p95(previous, current, "shunter_queue_wait_seconds", "model")
    for model in sorted(set(requests) | set(in_flight)):
        if not model:
            continue
        table.add_row(model, _fmt(requests.get(model)), _fmt(errors.get(model, 0.0)), _fmt(in_flight.get(model)),
                      _fmt(ttft.get(model), " s"), _fmt(wait.get(model), " s"))
    return table


def _tiers_and_tenants(previous: Reading | None, current: Reading) -> Table:
    table = Table(title="Queues by tier, busiest tenants, refusals", expand=True)
    for column in ("tier", "queued", "queue wait p95", "tenant", "tokens/s", "refusal reason", "refusals/s"):
        table.add_column(column)
    depth = _by(current, "shunter_queue_depth", "tier")
    wait = _p95(previous, current, "shunter_queue_wait_seconds", "tier")
    tiers = sorted(set(depth) | set(wait))
    tenants = sorted(_rate(previous, current, "shunter_tokens_total", "tenant").items(), key=lambda kv: -kv[1])[:5]
    refusals = sorted(_rate(previous, current, "shunter_admission_rejections_total", "reason").items(),
                      key=lambda kv: -kv[1])[:5]
    for i in range(max(len(tiers), len(tenants), len(refusals))):
        tier = tiers[i] if i < len(tiers) else ""
        tenant, tokens = tenants[i] if i < len(tenants) else ("", None)
        reason, rate = refusals[i] if i < len(refusals) else ("", None)
        table.add_row(tier, _fmt(depth.get(tier)) if tier else "", _fmt(wait.get(tier), " s") if tier else "",
                      tenant, _fmt(tokens), reason, _fmt(rate))
    return table


def _fleet(current: Reading, workers: list[dict[str, Any]]) -> Table:
    table = Table(title="Workers, replicas and rollouts", expand=True)
    for column in ("worker", "pool", "alive", "models ready", "pool/model", "desired", "ready", "rollout"):
        table.add_column(column)
    desired = {dict(k)["pool"] + "/" + dict(k)["model"]: v
               for k, v in current.series("shunter_capacity_desired_replicas").items()}
    ready = {dict(k)["pool"] + "/" + dict(k)["model"]: v
             for k, v in current.series("shunter_capacity_ready_replicas").items()}
    rollouts = [dict(k)["model"] for k, v in current.series("shunter_rollout_active").items() if v > 0]
    keys = sorted(desired)
    for i in range(max(len(workers), len(keys), len(rollouts))):
        w = workers[i] if i < len(workers) else {}
        ready_models = sum(1 for ok in w.get("models", {}).values() if ok)
        key = keys[i] if i < len(keys) else ""
        table.add_row(w.get("name", ""), w.get("pool", ""), ("yes" if w["alive"] else "NO") if w else "",
                      f"{ready_models}/{len(w.get('models', {}))}" if w else "", key,
                      _fmt(desired.get(key)) if key else "", _fmt(ready.get(key)) if key else "",
                      rollouts[i] if i < len(rollouts) else "")
    return table


def render(previous: Reading | None, current: Reading, workers: list[dict[str, Any]]) -> Group:
    """The whole view for two consecutive readings and control's workers."""
    return Group(_models(previous, current), _tiers_and_tenants(previous, current), _fleet(current, workers))


def _read(client: httpx.Client, gateway_url: str, control_url: str, token: str) -> tuple[Reading, list[dict[str, Any]]]:
    texts: list[str] = []
    for url in (f"{gateway_url}/metrics", f"{control_url}/metrics"):
        with contextlib.suppress(httpx.HTTPError):  # a part that does not answer shows empty; the view goes on
            texts.append(client.get(url).text)
    try:
        workers = client.get(f"{control_url}/admin/v1/workers", headers={"Authorization": f"Bearer {token}"}).json()
    except (httpx.HTTPError, ValueError):
        workers = []
    return Reading.parse(texts, time.monotonic()), workers if isinstance(workers, list) else []


def top(gateway_url: Annotated[str, typer.Option(help="a gateway (its /metrics)")] = "http://127.0.0.1:8080",
        control_url: Annotated[str, typer.Option(help="control's API")] = "http://127.0.0.1:8081",
        interval_s: Annotated[float, typer.Option("--interval", min=0.2, help="seconds between readings")] = 2.0,
        iterations: Annotated[int, typer.Option(help="stop after this many readings (0: until Ctrl-C)")] = 0,
        token_file: Annotated[str, typer.Option(help="the admin token")] = "var/admin.token",
        metrics_token: Annotated[str, typer.Option(envvar="SHUNTER_METRICS_TOKEN",
                                                   help="bearer token of /metrics, if gateway.yaml sets one")] = ""
        ) -> None:
    """A live view of models, queues, tenants, workers, replicas and rollouts (Ctrl-C to leave)."""
    from pathlib import Path

    from rich.live import Live

    token = Path(token_file).read_text().strip() if Path(token_file).exists() else ""
    headers = {"Authorization": f"Bearer {metrics_token}"} if metrics_token else {}
    previous: Reading | None = None
    count = 0
    with httpx.Client(timeout=max(1.0, interval_s), headers=headers) as client, \
            Live(refresh_per_second=4, screen=False) as live:
        try:
            while iterations == 0 or count < iterations:
                current, workers = _read(client, gateway_url, control_url, token)
                live.update(render(previous, current, workers))
                previous, count = current, count + 1
                if iterations == 0 or count < iterations:
                    time.sleep(interval_s)
        except KeyboardInterrupt:
            pass
