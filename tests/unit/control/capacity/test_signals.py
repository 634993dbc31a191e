"""The gateways' Prometheus pages read as capacity signals: sums, rates, p95s, burn rates."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from control.capacity.signals import Reading, SignalHistory, burn_rate, over, pool_of_worker, quantile

BUCKETS = (0.1, 0.5, 1.0, 5.0)


class Page:
    """A gateway's metrics with the series names the controller reads."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.pending = Gauge("shunter_capacity_pending_tokens", "", ["pool", "model"], registry=r)
        self.held = Gauge("shunter_capacity_held_requests", "", ["model"], registry=r)
        self.tokens = Counter("shunter_capacity_arrived_tokens", "", ["model", "kind"], registry=r)
        self.requests = Counter("shunter_requests", "", ["route", "model", "outcome"], registry=r)
        self.queue_wait = Histogram("shunter_queue_wait_seconds", "", ["model", "tier"], buckets=BUCKETS, registry=r)
        self.ttft = Histogram("shunter_time_to_first_token_seconds", "", ["model", "tier"], buckets=BUCKETS,
                              registry=r)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def _reading(at_s: float, *pages: Page) -> Reading:
    reading = Reading(at_s)
    for page in pages:
        reading.add(page.text())
    return reading


def test_gauges_and_counters_are_summed_over_gateways() -> None:
    a, b = Page(), Page()
    a.pending.labels("cpu", "embed").set(100)
    b.pending.labels("cpu", "embed").set(50)
    a.held.labels("vision").set(2)
    b.held.labels("vision").set(3)
    reading = _reading(0.0, a, b)
    assert reading.pending[("cpu", "embed", "prompt")] == 150
    assert reading.held["vision"] == 5
    assert reading.models() == {"embed", "vision"}


def test_rates_and_p95_come_from_deltas_over_the_window() -> None:
    page = Page()
    history = SignalHistory(keep_s=100)
    for _ in range(50):
        page.queue_wait.labels("embed", "premium").observe(0.05)  # old, fast: outside the window
    history.add(_reading(0.0, page))
    page.tokens.labels("embed", "prompt").inc(1000)
    for _ in range(19):
        page.queue_wait.labels("embed", "standard").observe(2.0)
    page.queue_wait.labels("embed", "standard").observe(0.05)
    history.add(_reading(10.0, page))
    window = history.window(10.0)
    assert window.seconds == 10.0
    assert window.token_rate("embed", "prompt") == pytest.approx(100.0)
    p95 = quantile(window.queue_wait("embed"), 0.95)
    assert p95 is not None and 1.0 < p95 <= 5.0


def test_quantile_edge_cases() -> None:
    assert quantile((), 0.95) is None
    assert quantile(((1.0, 0.0), (math.inf, 0.0)), 0.95) is None
    assert quantile(((1.0, 0.0), (math.inf, 4.0)), 0.5) == 1.0  # all above the last finite bound
    assert quantile(((1.0, 10.0), (2.0, 10.0), (math.inf, 10.0)), 0.5) == pytest.approx(0.5)
    assert over(((0.5, 6.0), (1.0, 8.0), (math.inf, 10.0)), 0.5) == 4.0


def test_burn_rate_counts_capacity_refusals_failures_and_late_first_tokens() -> None:
    page = Page()
    history = SignalHistory(keep_s=100)
    history.add(_reading(0.0, page))
    route = "/v1/chat/completions"
    page.requests.labels(route, "chat", "completed").inc(90)
    page.requests.labels(route, "chat", "rejected(queue_full)").inc(5)
    page.requests.labels(route, "chat", "rejected(invalid_api_key)").inc(3)  # the client's fault: not a miss
    page.requests.labels(route, "chat", "expired").inc(2)
    for _ in range(3):
        page.ttft.labels("chat", "premium").observe(4.0)  # over a 1 s objective
    history.add(_reading(60.0, page))
    # misses 5 + 2 + 3 = 10 of 100, over a 1 % budget
    assert burn_rate(history.window(60.0), "chat", 1.0, 0.01) == pytest.approx(10.0)
    assert burn_rate(history.window(60.0), "embed", 1.0, 0.01) == 0.0


def test_history_keeps_its_span_and_a_young_history_uses_its_oldest_reading() -> None:
    history = SignalHistory(keep_s=30)
    for t in range(0, 100, 10):
        history.add(Reading(float(t)))
    assert history.readings[0].at_s >= 60.0
    assert history.window(300).seconds == history.readings[-1].at_s - history.readings[0].at_s
    assert SignalHistory(keep_s=30).window(10).oldest is None


def test_worker_names_map_to_their_pool() -> None:
    assert pool_of_worker("local-cpu-1", ["local-cpu"]) == "local-cpu"
    assert pool_of_worker("other-0", ["local-cpu"]) is None


def test_tenant_shares_and_held_regions_are_read_from_the_gateways() -> None:
    a, b = Page(), Page()
    for page in (a, b):
        page.tenant = Counter("shunter_capacity_tenant_tokens", "", ["model", "tenant"], registry=page.registry)
        page.regions = Gauge("shunter_capacity_held_region_requests", "", ["model", "region"],
                             registry=page.registry)
    history = SignalHistory(600.0)
    history.add(_reading(0.0, a, b))
    a.tenant.labels("chat", "acme").inc(300)
    b.tenant.labels("chat", "acme").inc(300)
    b.tenant.labels("chat", "beta").inc(200)
    a.tenant.labels("embed", "beta").inc(50)
    a.held.labels("vision").set(2)
    a.regions.labels("vision", "eu").set(2)
    a.regions.labels("vision", "us").set(1)  # one of the two held requests may not run in us
    b.held.labels("vision").set(1)
    b.regions.labels("vision", "eu").set(1)
    history.add(_reading(60.0, a, b))
    window = history.window(60.0)
    assert window.tenant_shares("chat") == pytest.approx({"acme": 0.75, "beta": 0.25})
    assert window.tenant_shares("embed") == {"beta": 1.0} and window.tenant_shares("vision") == {}
    newest = window.newest
    assert newest.held_in("vision") == frozenset({"eu"})  # 3 held over both gateways, all may run in eu
    a.regions.labels("vision", "us").set(2)
    b.regions.labels("vision", "us").set(1)
    assert _reading(61.0, a, b).held_in("vision") == frozenset()  # every region: any
    assert _reading(61.0, Page()).held_in("vision") == frozenset()  # nothing held
