"""Prometheus metrics of the gateway, on a registry owned by the app (tests build many apps)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Fine buckets (x1.25 from 1 ms to ~70 s) for the canary analysis, which compares p99s per version.
VERSION_LATENCY_BUCKETS_S = tuple(round(0.001 * 1.25**i, 6) for i in range(51))
# Fine around the 20 ms loop-lag target (gateway/loop_lag.py).
LOOP_LAG_BUCKETS_S = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025,
                      0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5)


@dataclass
class GatewayMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    # the tiers' TTFT objectives: bucket bounds too, so an SLO rule counts misses exactly
    # (le="<ttft_s>", deploy/observability/rules)
    ttft_objectives_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        r = self.registry
        ttft_buckets_s = tuple(sorted(set(_LATENCY_BUCKETS_S) | {float(s) for s in self.ttft_objectives_s}))
        self.event_loop_lag_s = Histogram("shunter_gateway_event_loop_lag_seconds",
                                          "How late the event loop ran a timer due every 10 ms",
                                          buckets=LOOP_LAG_BUCKETS_S, registry=r)
        self.requests = Counter("shunter_requests", "Requests by route, model and outcome",
                                ["route", "model", "outcome"], registry=r)
        self.duration_s = Histogram("shunter_request_duration_seconds",
                                    "Time from request to last byte", ["route", "model"],
                                    buckets=_LATENCY_BUCKETS_S, registry=r)
        self.ttft_s = Histogram("shunter_time_to_first_token_seconds",
                                "Time from admission to first streamed token", ["model", "tier", "pool"],
                                buckets=ttft_buckets_s, registry=r)
        self.tpot_s = Histogram("shunter_time_per_output_token_seconds",
                                "Streamed generations: time from first to last token over the tokens after the first",
                                ["model", "tier", "pool"], buckets=_LATENCY_BUCKETS_S, registry=r)
        self.queue_wait_s = Histogram("shunter_queue_wait_seconds",
                                      "Time from admission to dispatch to a worker", ["model", "tier", "pool"],
                                      buckets=_LATENCY_BUCKETS_S, registry=r)
        self.outcomes = Counter("shunter_scheduled_outcomes", "Outcomes of scheduled requests by tier and model",
                                ["tier", "model", "outcome"], registry=r)
        self.rejections = Counter("shunter_admission_rejections", "Admission rejections by tier and reason",
                                  ["tier", "reason"], registry=r)
        self.weighted_service = Gauge("shunter_tenant_weighted_service_tokens",
                                      "Virtual token counter per tenant (service / weight)",
                                      ["tenant", "tier"], registry=r)
        self.cache_rows = Counter("shunter_response_cache_rows", "Rows looked up in the response cache",
                                  ["model", "result"], registry=r)
        self.worker_kv_tokens = Gauge("shunter_worker_kv_tokens",
                                      "LLM engine KV pool of each worker as the scheduler sees it",
                                      ["worker", "state"], registry=r)
        self.worker_prefill_tokens_per_s = Gauge(
            "shunter_worker_prefill_tokens_per_second",
            "LLM engine prefill speed the scheduler predicts with, learned from first tokens", ["worker", "model"],
            registry=r)
        self.worker_prefill_overhead_s = Gauge(
            "shunter_worker_prefill_overhead_seconds",
            "LLM engine fixed cost per prompt the scheduler predicts with, learned from first tokens",
            ["worker", "model"], registry=r)
        self.queue_depth = Gauge("shunter_queue_depth", "Requests waiting in the gateway's queue per tier",
                                 ["tier"], registry=r)
        self.tokens = Counter("shunter_tokens", "Tokens processed by tenant, model and kind",
                              ["tenant", "model", "kind"], registry=r)
        self.in_flight = Gauge("shunter_in_flight_requests", "Requests in flight per model",
                               ["model"], registry=r)
        self.version_requests = Counter("shunter_version_requests",
                                        "Dispatched requests by model version and outcome class",
                                        ["model", "version", "outcome"], registry=r)
        self.version_latency_s = Histogram("shunter_version_latency_seconds",
                                           "Completed requests' latency by model version (TTFT for LLMs)",
                                           ["model", "version"], buckets=VERSION_LATENCY_BUCKETS_S, registry=r)
        self.version_holders = Gauge("shunter_version_requests_open",
                                     "Requests bound to a model version and not yet ended (queued or running); "
                                     "a version leaving service is drained when this reaches 0",
                                     ["model", "version"], registry=r)
        self.routing_generation = Gauge("shunter_routing_generation",
                                        "Generation of the routing table (aliases and weights) in use",
                                        registry=r)
        self.worker_ready = Gauge("shunter_worker_model_ready", "1 when a worker has the model READY",
                                  ["worker", "model"], registry=r)
        self.state_store_up = Gauge("shunter_state_store_up",
                                    "1 while the state store answers (0: this gateway serves from its own view)",
                                    ["store"], registry=r)
        self.worker_streams = Gauge("shunter_worker_generation_streams",
                                    "gRPC generation streams per worker: opened since start (opened), idle now (idle)",
                                    ["worker", "state"], registry=r)
        self.retries = Counter("shunter_worker_retries",
                               "Requests sent again after their worker failed (each resume of a stream counts)",
                               ["model"], registry=r)
        self.stream_resumes = Counter("shunter_stream_resumes",
                                      "Streams continued after a failure: on another worker (worker) or for a "
                                      "client reconnecting with Last-Event-ID (client)", ["kind"], registry=r)
        self._capacity_signals(r)

    def _capacity_signals(self, r: CollectorRegistry) -> None:
        """What control's capacity controller reads (``gateway/capacity.py``)."""
        self.capacity_pending_tokens = Gauge(
            "shunter_capacity_pending_tokens", "Queued requests' cost tokens (kind: prompt | output, their max "
            "output), split over the pools that may serve them", ["pool", "model", "kind"], registry=r)
        self.capacity_inflight_tokens = Gauge(
            "shunter_capacity_inflight_tokens", "Dispatched, unfinished requests' prompt + max output cost tokens",
            ["pool", "model"], registry=r)
        self.capacity_held_requests = Gauge(
            "shunter_capacity_held_requests", "Requests held in the queue for a cold start (model at zero)",
            ["model"], registry=r)
        self.capacity_arrived_tokens = Counter(
            "shunter_capacity_arrived_tokens", "Cost tokens of requests that reached admission, by kind",
            ["model", "kind"], registry=r)
        self.capacity_tenant_tokens = Counter(
            "shunter_capacity_tenant_tokens", "Cost tokens (prompt + max output) of requests that reached "
            "admission, by tenant: the tenants' shares of a model's demand", ["model", "tenant"], registry=r)
        self.capacity_held_regions = Gauge(
            "shunter_capacity_held_region_requests", "Requests held for a cold start that may run in the "
            "region (a tenant that names no regions may run in any of the model's)", ["model", "region"],
            registry=r)
