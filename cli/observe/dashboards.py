"""Grafana dashboards as code (grafanalib), rendered into ``deploy/observability/dashboards/``.

Each dashboard is a list of ``PanelSpec``: a title, a unit and its queries (PromQL and the
legend, whose ``{{label}}`` names the labels the query must return). ``QUERIES`` lists every
query of every panel: the integration test runs each against a real Prometheus that scraped the
real stack, and a unit test keeps the JSON files equal to what this module renders.

- **fleet**: requests and outcomes, refusals by reason, TTFT / TPOT / queue-wait percentiles by
  tier, queue depth, the SLO error ratio by tier.
- **tenants**: service share, tokens per minute (against the tenant's quota), the weighted
  service counters the fair queue orders by, attainment by tier.
- **pools**: desired vs ready replicas (the capacity controller), KV use, tokens/s, cost per hour,
  Triton's own queue and compute time.
- **rollouts**: traffic, errors and latency per model version, open requests per version, the
  routing generation, rollouts active.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard, GridPos, Target, Template, Templating, TimeSeries

RATE = "$__rate_interval"
DATASOURCE = "${datasource}"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str
    needs_capacity_controller: bool = False  # series control exports only while its controller runs

    @property
    def legend_labels(self) -> tuple[str, ...]:
        return tuple(re.findall(r"\{\{\s*(\w+)\s*\}\}", self.legend))


@dataclass(frozen=True)
class PanelSpec:
    title: str
    unit: str
    queries: tuple[Query, ...]


def _quantiles(metric: str, by: str) -> tuple[Query, ...]:
    return tuple(Query(f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket[{RATE}])))",
                       f"p{int(q * 100)} {{{{{by}}}}}") for q in (0.5, 0.95, 0.99))


FLEET = (
    PanelSpec("Requests by outcome", "reqps", (
        Query(f"sum by (outcome) (rate(shunter_requests_total[{RATE}]))", "{{outcome}}"),)),
    PanelSpec("Refusals by reason", "reqps", (
        Query(f"sum by (reason) (rate(shunter_admission_rejections_total[{RATE}]))", "{{reason}}"),)),
    PanelSpec("Time to first token by tier", "s", _quantiles("shunter_time_to_first_token_seconds", "tier")),
    PanelSpec("Time per output token by tier", "s", _quantiles("shunter_time_per_output_token_seconds", "tier")),
    PanelSpec("Queue wait by tier", "s", _quantiles("shunter_queue_wait_seconds", "tier")),
    PanelSpec("Queue depth by tier", "short", (Query("sum by (tier) (shunter_queue_depth)", "{{tier}}"),)),
    PanelSpec("SLO error ratio by tier (5m; budget 1%)", "percentunit", (
        Query("shunter:slo_error_ratio:rate5m", "{{tier}}"),)),
    PanelSpec("In flight by model", "short", (Query("sum by (model) (shunter_in_flight_requests)", "{{model}}"),)),
)
TENANTS = (
    PanelSpec("Service share (tokens)", "percentunit", (
        Query(f"sum by (tenant) (rate(shunter_tokens_total[{RATE}])) / ignoring (tenant) group_left "
              f"sum(rate(shunter_tokens_total[{RATE}]))", "{{tenant}}"),)),
    PanelSpec("Tokens per minute by tenant (quota: tokens_per_minute)", "short", (
        Query("sum by (tenant, kind) (rate(shunter_tokens_total[1m])) * 60", "{{tenant}} {{kind}}"),)),
    PanelSpec("Weighted service (fair-queue counters)", "short", (
        Query("shunter_tenant_weighted_service_tokens", "{{tenant}} ({{tier}})"),)),
    PanelSpec("Attainment by tier (5m)", "percentunit", (Query("1 - shunter:slo_error_ratio:rate5m", "{{tier}}"),)),
    PanelSpec("Refusals by tier and reason", "reqps", (
        Query(f"sum by (tier, reason) (rate(shunter_admission_rejections_total[{RATE}]))", "{{tier}} {{reason}}"),)),
)
POOLS = (
    PanelSpec("Desired vs ready replicas", "short", (
        Query("shunter_capacity_desired_replicas", "desired {{pool}}/{{model}}", True),
        Query("shunter_capacity_ready_replicas", "ready {{pool}}/{{model}}", True))),
    PanelSpec("Capped by a budget", "short", (
        Query("shunter_capacity_capped_by_budget", "{{pool}}/{{model}}", True),)),
    PanelSpec("Cost per hour", "currencyUSD", (
        Query("shunter:pool_cost_per_hour:dollars", "{{pool}}", True),)),
    PanelSpec("KV use by worker", "percentunit", (Query("shunter:worker_kv_use:ratio", "{{worker}}"),)),
    PanelSpec("Tokens per second by model", "short", (
        Query(f"sum by (model, kind) (rate(shunter_tokens_total[{RATE}]))", "{{model}} {{kind}}"),)),
    PanelSpec("Workers up", "short", (Query('up{job="triton"}', "{{worker}} ({{pool}})"),)),
    PanelSpec("Triton queue time per request", "s", (
        Query(f"sum by (worker, model) (rate(nv_inference_queue_duration_us[{RATE}])) / 1e6 / "
              f"sum by (worker, model) (rate(nv_inference_request_success[{RATE}]))", "{{worker}} {{model}}"),)),
)
ROLLOUTS = (
    PanelSpec("Traffic by version", "reqps", (
        Query(f"sum by (model, version) (rate(shunter_version_requests_total[{RATE}]))", "{{model}} v{{version}}"),)),
    PanelSpec("Errors by version", "reqps", (
        Query(f'sum by (model, version) (rate(shunter_version_requests_total{{outcome!="completed"}}[{RATE}]))',
              "{{model}} v{{version}}"),)),
    PanelSpec("Latency p99 by version", "s", (
        Query(f"histogram_quantile(0.99, sum by (le, model, version) "
              f"(rate(shunter_version_latency_seconds_bucket[{RATE}])))", "{{model}} v{{version}}"),)),
    PanelSpec("Open requests by version", "short", (
        Query("shunter_version_requests_open", "{{model}} v{{version}}"),)),
    PanelSpec("Rollouts active", "short", (Query("shunter_rollout_active", "{{model}}"),)),
    PanelSpec("Routing generation", "short", (Query("max(shunter_routing_generation)", "generation"),)),
)
DASHBOARDS: dict[str, tuple[str, tuple[PanelSpec, ...]]] = {
    "fleet": ("Shunter / Fleet overview", FLEET),
    "tenants": ("Shunter / Tenants", TENANTS),
    "pools": ("Shunter / Pools", POOLS),
    "rollouts": ("Shunter / Rollouts", ROLLOUTS),
}
QUERIES: tuple[Query, ...] = tuple(q for _, panels in DASHBOARDS.values() for p in panels for q in p.queries)


def _panel(spec: PanelSpec, index: int) -> TimeSeries:
    targets = [Target(expr=q.expr, legendFormat=q.legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
               for i, q in enumerate(spec.queries)]
    return TimeSeries(title=spec.title, unit=spec.unit, targets=targets, dataSource=DATASOURCE,
                      gridPos=GridPos(h=8, w=12, x=12 * (index % 2), y=8 * (index // 2)))


def dashboard_json(name: str) -> str:
    """The Grafana JSON of dashboard ``name`` (a key of ``DASHBOARDS``), stable across runs."""
    title, panels = DASHBOARDS[name]
    datasource = Template(name="datasource", query="prometheus", type="datasource", label="Prometheus",
                          default="Prometheus")
    board = Dashboard(title=title, uid=f"shunter-{name}", tags=["shunter"], timezone="utc", refresh="10s",
                      templating=Templating(list=[datasource]),
                      panels=[_panel(spec, i) for i, spec in enumerate(panels)]).auto_panel_ids()
    return json.dumps(board.to_json_data(), cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"
