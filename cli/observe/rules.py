"""Prometheus recording and alerting rules, rendered from the stack's configuration.

``render_rules(scheduling, error_budget)`` returns the rule file (a dict for YAML) that
``deploy/observability/rules/shunter.rules.yml`` holds; a unit test keeps the two equal, and
``promtool check rules`` / ``promtool test rules`` check it.

The SLO, per tier: a request is bad when it expired, failed, was refused for capacity
(``CAPACITY_REASONS``, the capacity controller's list), or streamed its first token later than its
tier's ``ttft_s`` (``scheduling.yaml``); the objective is ``1 - error_budget`` (``control.yaml``'s
``replicas.error_budget``, 99 % by default). Alerts follow the multi-window, multi-burn-rate form
of the Google SRE workbook: page at 14.4x over 1 h and 5 m, or 6x over 6 h and 30 m; ticket at 3x
over 1 d and 2 h. The rest: a worker, gateway or control down, a rollout stuck, the capacity
controller capped, the state store degraded.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.capacity.signals import CAPACITY_REASONS
from scheduling.tenants import Tier
from settings.scheduling import SchedulingSettings

WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d")
ROLLOUT_STUCK_S = 3600


@dataclass(frozen=True)
class BurnAlert:
    name: str
    long: str
    short: str
    burn: float
    severity: str
    wait: str


BURN_ALERTS = (
    BurnAlert("ShunterErrorBudgetBurnFast", "1h", "5m", 14.4, "page", "2m"),
    BurnAlert("ShunterErrorBudgetBurnSteady", "6h", "30m", 6.0, "page", "15m"),
    BurnAlert("ShunterErrorBudgetBurnSlow", "1d", "2h", 3.0, "ticket", "1h"),
)


def le_label(seconds: float) -> str:
    """A bucket bound as prometheus_client writes it in ``le`` (``4.0``, ``2.5``)."""
    return repr(float(seconds))


def _sli_rules(scheduling: SchedulingSettings, window: str) -> list[dict[str, object]]:
    reasons = "|".join(sorted(CAPACITY_REASONS))
    rules: list[dict[str, object]] = [
        {"record": f"shunter:slo_requests:rate{window}",
         "expr": f"sum by (tier) (rate(shunter_scheduled_outcomes_total[{window}]))"},
        {"record": f"shunter:slo_bad_requests:rate{window}", "labels": {"kind": "ended"},
         "expr": f'sum by (tier) (rate(shunter_scheduled_outcomes_total{{outcome=~"expired|failed"}}[{window}]))'},
        {"record": f"shunter:slo_bad_requests:rate{window}", "labels": {"kind": "refused"},
         "expr": f'sum by (tier) (rate(shunter_admission_rejections_total{{reason=~"{reasons}"}}[{window}]))'},
    ]
    for tier in Tier:
        slo = scheduling.slo.get(tier)
        if slo is None:
            continue
        series = f'tier="{tier.value}"'
        rules.append({
            "record": f"shunter:slo_bad_requests:rate{window}", "labels": {"kind": "slow", "tier": tier.value},
            "expr": (f"sum by (tier) (rate(shunter_time_to_first_token_seconds_count{{{series}}}[{window}]))"
                     f" - sum by (tier) (rate(shunter_time_to_first_token_seconds_bucket"
                     f'{{{series},le="{le_label(slo.ttft_s)}"}}[{window}]))')})
    rules.append({"record": f"shunter:slo_error_ratio:rate{window}",
                  "expr": f"sum by (tier) (shunter:slo_bad_requests:rate{window})"
                          f" / shunter:slo_requests:rate{window}"})
    return rules


def _burn_alerts(error_budget: float) -> list[dict[str, object]]:
    alerts: list[dict[str, object]] = []
    for alert in BURN_ALERTS:
        threshold = round(alert.burn * error_budget, 6)
        alerts.append({
            "alert": alert.name,
            "expr": (f"shunter:slo_error_ratio:rate{alert.long} > {threshold}"
                     f" and shunter:slo_error_ratio:rate{alert.short} > {threshold}"),
            "for": alert.wait,
            "labels": {"severity": alert.severity},
            "annotations": {
                "summary": f"Tier {{{{ $labels.tier }}}} burns its error budget at {alert.burn:g}x "
                           f"over {alert.long} and {alert.short}",
                "description": f"{{{{ $value | humanizePercentage }}}} of {{{{ $labels.tier }}}} requests missed "
                               f"their SLO over {alert.short} (budget {error_budget:.2%}).",
                "runbook": "docs/observability.md#error-budget-burn"}})
    return alerts


def _recording_rules(scheduling: SchedulingSettings, cost_per_hour: dict[str, float]) -> list[dict[str, object]]:
    rules: list[dict[str, object]] = [
        {"record": "shunter:requests:rate5m", "expr": "sum by (model, outcome) (rate(shunter_requests_total[5m]))"},
        {"record": "shunter:ttft_seconds:p95_5m", "expr": "histogram_quantile(0.95, sum by (le, tier, model) "
                                                          "(rate(shunter_time_to_first_token_seconds_bucket[5m])))"},
        {"record": "shunter:queue_wait_seconds:p95_5m", "expr": "histogram_quantile(0.95, sum by (le, tier, model) "
                                                                "(rate(shunter_queue_wait_seconds_bucket[5m])))"},
        {"record": "shunter:tokens:rate5m", "expr": "sum by (tenant, model, kind) (rate(shunter_tokens_total[5m]))"},
        {"record": "shunter:capacity_arrived_tokens:rate1m",
         "expr": "sum by (model, kind) (rate(shunter_capacity_arrived_tokens_total[1m]))"},
        {"record": "shunter:worker_kv_use:ratio",
         "expr": 'shunter_worker_kv_tokens{state="used"} / ignoring (state) shunter_worker_kv_tokens{state="total"}'},
    ]
    for pool, cost in sorted(cost_per_hour.items()):
        rules.append({"record": "shunter:pool_cost_per_hour:dollars",
                      "expr": f'max by (pool) (shunter_capacity_ready_replicas{{pool="{pool}"}}) * {cost:g}'})
    return rules


def _fleet_alerts() -> list[dict[str, object]]:
    def alert(name: str, expr: str, wait: str, severity: str, summary: str, anchor: str) -> dict[str, object]:
        return {"alert": name, "expr": expr, "for": wait, "labels": {"severity": severity},
                "annotations": {"summary": summary, "runbook": f"docs/observability.md#{anchor}"}}

    return [
        alert("ShunterWorkerDown", 'up{job="triton"} == 0', "1m", "page",
              "Triton worker {{ $labels.worker }} ({{ $labels.pool }}) does not answer scrapes", "worker-down"),
        alert("ShunterGatewayDown", 'up{job="shunter-gateway"} == 0', "1m", "page",
              "Gateway {{ $labels.instance }} does not answer scrapes", "gateway-down"),
        alert("ShunterControlDown", 'up{job="shunter-control"} == 0', "5m", "ticket",
              "Control {{ $labels.instance }} does not answer scrapes", "control-down"),
        alert("ShunterRolloutStuck", f"time() - shunter_rollout_last_change_timestamp_seconds > {ROLLOUT_STUCK_S}",
              "5m", "ticket", "Rollout of {{ $labels.model }} ({{ $labels.kind }}, {{ $labels.status }}) has not "
              "changed for over an hour", "rollout-stuck"),
        alert("ShunterCapacityCapped", "shunter_capacity_capped_by_budget == 1", "15m", "ticket",
              "A cap holds {{ $labels.model }} on {{ $labels.pool }} below what demand asks", "capacity-capped"),
        alert("ShunterStateStoreDegraded", "shunter_state_store_up == 0", "1m", "page",
              "Gateway {{ $labels.instance }} cannot reach its state store {{ $labels.store }}",
              "state-store-degraded"),
    ]


def render_rules(scheduling: SchedulingSettings, error_budget: float,
                 cost_per_hour: dict[str, float]) -> dict[str, object]:
    """The rule file: SLI recordings per window, the other recordings, the burn-rate and fleet alerts."""
    sli = [rule for window in WINDOWS for rule in _sli_rules(scheduling, window)]
    return {"groups": [
        {"name": "shunter-slo", "rules": sli},
        {"name": "shunter-signals", "rules": _recording_rules(scheduling, cost_per_hour)},
        {"name": "shunter-slo-alerts", "rules": _burn_alerts(error_budget)},
        {"name": "shunter-fleet-alerts", "rules": _fleet_alerts()},
    ]}
