"""What a simulated gateway measures for the capacity controller, each period: the signals of
``scheduling.autoscaling.ModelSignals`` / ``PoolSignals`` from the requests' lives, and the
request rate a request-count autoscaler (the HPA baseline) reads.

* arriving prompt tokens per second over the last ``rate_window_s`` (60 s: the live loop's
  ``rate(x[1m])``, four periods); arriving output tokens estimated as
  prompt tokens x the output/prompt ratio of the requests completed in the last 10 minutes (the
  gateway knows a request's output only when it ends);
* pending tokens: the requests queued in the gateway now (output by the same ratio);
* queue-wait and TTFT p95 of the objective tier's requests over the last ``latency_window_s``
  (queue wait also counts the age of the ones still queued, so a backlog shows at once);
* burn rates: SLO misses of all tiers over the short and long windows, over the error budget;
* KV use of the ready replicas of each pool; idle time since the last arrival.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.autoscaling import ModelSignals, PoolModel, PoolSignals, Snapshot
from scheduling.outcomes import Outcome
from scheduling.tenants import Tier
from simulator.llm_worker import LlmWorker
from simulator.metrics import percentile
from simulator.records import RequestRecord, SimRequest

OUTPUT_RATIO_WINDOW_S = 600.0
DEFAULT_OUTPUT_RATIO = 0.25


@dataclass(frozen=True)
class Observation:
    """One period's measurements: the policy's snapshot and the request rate."""

    snapshot: Snapshot
    arrivals_rps: float  # over the last ``rate_window_s`` (what an HPA's Prometheus rate() reads)
    demand_tokens_per_s: float  # arriving prompt + estimated output tokens per second


class Observer:
    """Collects request events and turns them into an ``Observation`` for model ``model``."""

    def __init__(self, model: str, objective_tier: Tier, period_s: float, latency_window_s: float = 60.0,
                 rate_window_s: float = 60.0, burn_windows_s: tuple[float, float] = (300.0, 3600.0),
                 error_budget: float = 0.01) -> None:
        self.model, self.tier, self.period_s = model, objective_tier, period_s
        self.latency_window_s, self.rate_window_s = latency_window_s, rate_window_s
        self.burn_windows_s, self.error_budget = burn_windows_s, error_budget
        self._arrivals: deque[tuple[float, int]] = deque()  # (t, prompt tokens)
        self._waits: deque[tuple[float, float]] = deque()  # objective tier: (t, queue wait s)
        self._ttfts: deque[tuple[float, float]] = deque()
        self._done: deque[tuple[float, int, int]] = deque()  # (t, prompt, generated)
        self._outcomes: deque[tuple[float, bool]] = deque()  # (t, met its SLO)
        self._last_arrival_s = 0.0

    def arrived(self, item: SimRequest, now: float) -> None:
        self._arrivals.append((now, item.request.prefill_tokens))
        self._last_arrival_s = now

    def first_token(self, record: RequestRecord, now: float) -> None:
        if record.tier is self.tier:
            if record.dispatch_s is not None:
                self._waits.append((now, record.dispatch_s - record.arrival_s))
            self._ttfts.append((now, now - record.arrival_s))

    def ended(self, record: RequestRecord, now: float) -> None:
        if record.outcome is Outcome.COMPLETED:
            self._done.append((now, record.prefill_tokens, record.generated))
        self._outcomes.append((now, record.met_slo))

    def observe(self, now: float, pending: Iterable[SimRequest], counts: Mapping[str, Mapping[str, int]],
                engines: Mapping[str, Sequence[LlmWorker]]) -> Observation:
        self._trim(now)
        ratio = self._output_ratio()
        recent = [p for t, p in self._arrivals if now - t < self.rate_window_s]
        prompt_rate = sum(recent) / min(self.rate_window_s, max(now, self.period_s))
        queued = list(pending)
        pending_prompt = float(sum(i.request.prefill_tokens for i in queued))
        ages = [now - i.request.arrival_s for i in queued if i.request.tier is self.tier]
        short, long = (self._burn(now, w) for w in self.burn_windows_s)
        signals = ModelSignals(
            self.model, arriving_prompt_tokens_per_s=prompt_rate, arriving_output_tokens_per_s=prompt_rate * ratio,
            pending_prompt_tokens=pending_prompt, pending_output_tokens=pending_prompt * ratio,
            queue_wait_p95_s=percentile([w for _, w in self._waits] + ages, 95),
            ttft_p95_s=percentile([w for _, w in self._ttfts], 95), burn_rate_short=short, burn_rate_long=long,
            idle_s=now - self._last_arrival_s if not queued else 0.0)
        pools = {PoolModel(pool, self.model): _pool_signals(PoolModel(pool, self.model), c, engines.get(pool, ()))
                 for pool, c in counts.items()}
        rate = sum(1 for t, _ in self._arrivals if now - t < self.rate_window_s) / self.rate_window_s
        snapshot = Snapshot(MappingProxyType({self.model: signals}), MappingProxyType(pools))
        return Observation(snapshot, rate, prompt_rate * (1.0 + ratio))

    def _trim(self, now: float) -> None:
        horizon = max(self.period_s, self.rate_window_s)
        _drop_before(self._arrivals, now - horizon)
        _drop_before(self._waits, now - self.latency_window_s)
        _drop_before(self._ttfts, now - self.latency_window_s)
        _drop_before(self._done, now - OUTPUT_RATIO_WINDOW_S)
        _drop_before(self._outcomes, now - max(self.burn_windows_s))

    def _output_ratio(self) -> float:
        prompt = sum(p for _, p, _ in self._done)
        return sum(g for _, _, g in self._done) / prompt if prompt > 0 else DEFAULT_OUTPUT_RATIO

    def _burn(self, now: float, window_s: float) -> float:
        outcomes = [met for t, met in self._outcomes if now - t < window_s]
        if not outcomes:
            return 0.0
        return (sum(not met for met in outcomes) / len(outcomes)) / self.error_budget


def _drop_before(events: deque[tuple[float, int]] | deque[tuple[float, float]] | deque[tuple[float, int, int]]
                 | deque[tuple[float, bool]], cutoff: float) -> None:
    while events and events[0][0] < cutoff:
        events.popleft()


def _pool_signals(key: PoolModel, counts: Mapping[str, int], engines: Sequence[LlmWorker]) -> PoolSignals:
    total = sum(e.total_blocks for e in engines)
    used = sum(e.total_blocks - e.free_blocks for e in engines)
    block = engines[0].limits.kv_block_tokens if engines else 0
    return PoolSignals(key, ready=counts.get("ready", 0), starting=counts.get("starting", 0),
                       draining=counts.get("draining", 0), in_flight_tokens=float(used * block),
                       kv_used_fraction=used / total if total else 0.0)


