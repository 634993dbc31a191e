"""``shunter top``'s view from two readings of real gateway metrics: rates and p95s over the interval,
queues by tier, the busiest tenants, refusals, workers, replicas and rollouts."""

from __future__ import annotations

from prometheus_client import generate_latest
from rich.console import Console

from cli.top import Reading, render
from gateway.metrics import GatewayMetrics

CONTROL = """# TYPE shunter_capacity_desired_replicas gauge
shunter_capacity_desired_replicas{pool="local-cpu",model="embed"} 2
# TYPE shunter_capacity_ready_replicas gauge
shunter_capacity_ready_replicas{pool="local-cpu",model="embed"} 1
# TYPE shunter_rollout_active gauge
shunter_rollout_active{model="chat"} 1
shunter_rollout_active{model="embed"} 0
"""
WORKERS = [{"name": "local-cpu-0", "pool": "local-cpu", "alive": True, "models": {"chat": True, "embed": False}}]


def _text(view: object) -> str:
    console = Console(record=True, width=200)
    console.print(view)
    return console.export_text()


def test_the_view_shows_rates_and_percentiles_over_the_interval() -> None:
    metrics = GatewayMetrics()
    metrics.requests.labels("/v1/chat/completions", "chat", "completed").inc(100)  # before the interval
    first = Reading.parse([generate_latest(metrics.registry).decode(), CONTROL], at_s=0.0)
    metrics.requests.labels("/v1/chat/completions", "chat", "completed").inc(20)
    metrics.requests.labels("/v1/chat/completions", "chat", "failed(worker_failed)").inc(4)
    for _ in range(19):
        metrics.ttft_s.labels("chat", "premium", "local-cpu").observe(0.2)
    metrics.ttft_s.labels("chat", "premium", "local-cpu").observe(7.0)
    metrics.queue_depth.labels("batch").set(7)
    metrics.tokens.labels("demo-batch", "embed", "prompt").inc(500)
    metrics.rejections.labels("batch", "tier_shed").inc(10)
    second = Reading.parse([generate_latest(metrics.registry).decode(), CONTROL], at_s=2.0)
    text = _text(render(first, second, WORKERS))
    chat = next(line for line in text.splitlines() if " chat " in line and "req" not in line)
    assert "12.00" in chat and "2.00" in chat  # (20 + 4) / 2 s requests, 4 / 2 s errors
    assert "0.25 s" in chat  # the p95 bucket bound (19 of 20 at 0.2 s)
    assert "demo-batch" in text and "│ 250 " in text and "tier_shed" in text and "5.00" in text
    assert "local-cpu-0" in text and "1/2" in text and "local-cpu/embed" in text
    worker_row = next(line for line in text.splitlines() if "local-cpu-0" in line)
    assert worker_row.rstrip(" │").endswith("chat")  # the chat rollout in progress; embed has none


def test_the_first_reading_shows_no_rates_yet() -> None:
    metrics = GatewayMetrics()
    metrics.requests.labels("/v1/embeddings", "embed", "completed").inc(5)
    text = _text(render(None, Reading.parse([generate_latest(metrics.registry).decode()], at_s=0.0), []))
    assert "embed" in text and "0.00" in text
