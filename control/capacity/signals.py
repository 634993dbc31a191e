"""The gateways' Prometheus ``/metrics``, read as the capacity policy's signals.

The controller reads the same series an operator's Prometheus (or KEDA) sees, with
prometheus_client's text parser, sums them over every gateway (``Reading``), and keeps a short
history of readings (``SignalHistory``) so that counters become rates and histogram buckets
become p95s over a window, as PromQL's ``rate()`` and ``histogram_quantile()`` would:

==============================================  =============================================
series (gateway)                                signal
==============================================  =============================================
``shunter_capacity_pending_tokens{pool,model}`` pending prompt + output tokens (gauge; an
                                                optional ``kind`` label splits prompt/output)
``shunter_capacity_inflight_tokens{pool,model}`` tokens of the requests running (gauge)
``shunter_capacity_held_requests{model}``       requests held for capacity at zero (gauge)
``shunter_capacity_arrived_tokens_total``       arriving prompt / output cost tokens per model
``shunter_capacity_tenant_tokens_total``        arriving cost tokens per model and tenant (shares)
``shunter_capacity_held_region_requests``       held requests per model that may run in a region
                                                (rate; ``kind``: prompt | output)
``shunter_requests_total{model,outcome}``       outcomes: misses for the burn rate (rate)
``shunter_queue_wait_seconds{model}``           queue-wait p95 over the window (histogram)
``shunter_time_to_first_token_seconds{model}``  TTFT p95 and TTFT misses (histogram)
``shunter_worker_kv_tokens{worker,state}``      KV used / total per pool
``shunter_worker_prefill_tokens_per_second``    learned prefill speed per pool
==============================================  =============================================

A miss, for the error-budget burn rate, is a request that expired, failed, or was refused for
capacity (``predicted_slo_miss``, ``queue_full``, ``no_worker``, ``model_cold``,
``pool_saturated``, ``tier_shed``), or a first token later than the TTFT objective; the burn
rate is the miss share over the window divided by the error budget (1 - attainment objective).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

CAPACITY_REASONS = frozenset({"predicted_slo_miss", "queue_full", "no_worker", "model_cold", "pool_saturated",
                              "tier_shed"})
# (upper bound in s, cumulative count), sorted by bound; +Inf last
Buckets = tuple[tuple[float, float], ...]


@dataclass
class Reading:
    """One scrape of every gateway, summed: counters and histograms cumulative, gauges as now."""

    at_s: float
    tokens: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # (model, kind)
    requests: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # (model, label)
    queue_wait: dict[str, dict[float, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    ttft: dict[str, dict[float, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    pending: dict[tuple[str, str, str], float] = field(default_factory=lambda: defaultdict(float))  # pool, model, kind
    inflight: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # (pool, model)
    held: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    held_regions: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # model, region
    tenant_tokens: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # model, tenant
    kv: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))  # (worker, used|total)
    prefill: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))  # worker, model

    def add(self, text: str) -> None:
        """Add one gateway's ``/metrics`` page."""
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self._sample(sample.name, sample.labels, sample.value)

    def _sample(self, name: str, labels: Mapping[str, str], value: float) -> None:
        model = labels.get("model", "")
        if name == "shunter_capacity_pending_tokens":
            self.pending[(labels.get("pool", ""), model, labels.get("kind", "prompt"))] += value
        elif name == "shunter_capacity_inflight_tokens":
            self.inflight[(labels.get("pool", ""), model)] += value
        elif name == "shunter_capacity_held_requests":
            self.held[model] += value
        elif name == "shunter_capacity_held_region_requests":
            self.held_regions[(model, labels.get("region", ""))] += value
        elif name == "shunter_capacity_tenant_tokens_total":
            self.tenant_tokens[(model, labels.get("tenant", ""))] += value
        elif name == "shunter_capacity_arrived_tokens_total":
            self.tokens[(model, labels.get("kind", ""))] += value
        elif name == "shunter_requests_total":
            self.requests[(model, labels.get("outcome", ""))] += value
        elif name == "shunter_queue_wait_seconds_bucket":
            self.queue_wait[model][float(labels["le"])] += value
        elif name == "shunter_time_to_first_token_seconds_bucket":
            self.ttft[model][float(labels["le"])] += value
        elif name == "shunter_worker_kv_tokens":
            self.kv[(labels.get("worker", ""), labels.get("state", ""))] += value
        elif name == "shunter_worker_prefill_tokens_per_second" and value > 0:
            self.prefill[(labels.get("worker", ""), model)].append(value)

    def held_in(self, model: str) -> frozenset[str]:
        """The regions every held request of ``model`` may run in (empty: none held, or any region)."""
        held = self.held.get(model, 0.0)
        regions = {r: n for (m, r), n in self.held_regions.items() if m == model}
        if held <= 0 or not regions or all(n >= held for n in regions.values()):
            return frozenset()
        return frozenset(r for r, n in regions.items() if n >= held)

    def models(self) -> set[str]:
        """Every model a series names."""
        names = {m for m, _ in self.tokens} | {m for m, _ in self.requests} | set(self.queue_wait) | set(self.ttft)
        names |= {m for _, m, _ in self.pending} | {m for _, m in self.inflight} | set(self.held)
        return names - {""}


def quantile(buckets: Buckets, q: float) -> float | None:
    """``histogram_quantile(q)`` of non-cumulative-safe cumulative ``buckets`` (linear inside a
    bucket; the highest finite bound when it falls in +Inf); None with no observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    counts = [count for _, count in buckets]
    i = bisect.bisect_left(counts, rank)
    i = min(i, len(buckets) - 1)
    upper, count = buckets[i]
    if math.isinf(upper):
        finite = [b for b, _ in buckets if not math.isinf(b)]
        return finite[-1] if finite else None
    lower, below = (0.0, 0.0) if i == 0 else buckets[i - 1]
    if count <= below:
        return upper
    return lower + (upper - lower) * (rank - below) / (count - below)


def over(buckets: Buckets, bound_s: float) -> float:
    """Observations above ``bound_s`` (counted from the first bucket bound at or above it)."""
    if not buckets:
        return 0.0
    total = buckets[-1][1]
    at_or_under = max((count for upper, count in buckets if upper <= bound_s), default=0.0)
    return max(0.0, total - at_or_under)


def _delta(new: Mapping[float, float], old: Mapping[float, float] | None) -> Buckets:
    old = old or {}
    return tuple(sorted((bound, max(0.0, count - old.get(bound, 0.0))) for bound, count in new.items()))


@dataclass(frozen=True)
class Window:
    """What changed between two readings, ``seconds`` apart."""

    newest: Reading
    oldest: Reading | None

    @property
    def seconds(self) -> float:
        return 0.0 if self.oldest is None else self.newest.at_s - self.oldest.at_s

    def rate(self, values: Mapping[tuple[str, str], float], old: Mapping[tuple[str, str], float] | None,
             keys: Iterable[tuple[str, str]]) -> float:
        if self.seconds <= 0 or old is None:
            return 0.0
        return sum(max(0.0, values.get(k, 0.0) - old.get(k, 0.0)) for k in keys) / self.seconds

    def token_rate(self, model: str, kind: str) -> float:
        old = None if self.oldest is None else self.oldest.tokens
        return self.rate(self.newest.tokens, old, [(model, kind)])

    def tenant_shares(self, model: str) -> dict[str, float]:
        """Each tenant's share of ``model``'s arriving tokens in the window (none: empty)."""
        if self.oldest is None or self.seconds <= 0:
            return {}
        old = self.oldest.tenant_tokens
        tokens = {t: max(0.0, n - old.get((m, t), 0.0)) for (m, t), n in self.newest.tenant_tokens.items()
                  if m == model}
        total = sum(tokens.values())
        return {t: n / total for t, n in sorted(tokens.items()) if n > 0} if total > 0 else {}

    def requests(self, model: str) -> dict[str, float]:
        """Requests of ``model`` in the window by outcome label."""
        old = {} if self.oldest is None else self.oldest.requests
        return {label: value - old.get((m, label), 0.0)
                for (m, label), value in self.newest.requests.items() if m == model and self.oldest is not None}

    def queue_wait(self, model: str) -> Buckets:
        return self._hist(self.newest.queue_wait, None if self.oldest is None else self.oldest.queue_wait, model)

    def ttft(self, model: str) -> Buckets:
        return self._hist(self.newest.ttft, None if self.oldest is None else self.oldest.ttft, model)

    def _hist(self, new: Mapping[str, Mapping[float, float]], old: Mapping[str, Mapping[float, float]] | None,
              model: str) -> Buckets:
        if old is None or model not in new:
            return ()
        return _delta(new[model], old.get(model))


def burn_rate(window: Window, model: str, ttft_objective_s: float, error_budget: float) -> float:
    """Misses over all requests of ``model`` in ``window``, over the error budget (0 with none)."""
    outcomes = window.requests(model)
    total = sum(outcomes.values())
    if total <= 0:
        return 0.0
    misses = sum(n for label, n in outcomes.items() if _is_miss(label))
    misses += over(window.ttft(model), ttft_objective_s)
    return min(total, misses) / total / error_budget


def _is_miss(label: str) -> bool:
    if label.startswith(("expired", "failed")):
        return True
    if label.startswith("rejected(") and label.endswith(")"):
        return label[len("rejected("):-1] in CAPACITY_REASONS
    return False


@dataclass
class SignalHistory:
    """Readings of the last ``keep_s`` seconds; ``window(s)`` compares the newest with the newest
    at least ``s`` old (or the oldest kept, when the history is younger)."""

    keep_s: float
    readings: deque[Reading] = field(default_factory=deque)

    def add(self, reading: Reading) -> None:
        self.readings.append(reading)
        while len(self.readings) > 2 and reading.at_s - self.readings[1].at_s >= self.keep_s:
            self.readings.popleft()

    def window(self, seconds: float) -> Window:
        if not self.readings:
            return Window(Reading(0.0), None)
        newest = self.readings[-1]
        oldest = None
        for reading in self.readings:
            if newest.at_s - reading.at_s >= seconds:
                oldest = reading
        if oldest is None and len(self.readings) > 1:
            oldest = self.readings[0]
        return Window(newest, oldest)

    @property
    def newest(self) -> Reading | None:
        return self.readings[-1] if self.readings else None


def pool_of_worker(worker: str, pools: Sequence[str]) -> str | None:
    """``"<pool>-<index>"`` -> ``pool`` when the pool is known."""
    head, _, index = worker.rpartition("-")
    return head if head in pools and index.isdigit() else None
