"""The capacity controller's loop in the control service: signals in, the pure policy, replicas out.

Every ``period_s`` (an apscheduler job) ``run_once`` reads every gateway's ``/metrics``, builds
the policy's snapshot (``snapshot.py``) with the replica counts, calls
``scheduling.autoscaling.decide`` and applies each decision through the replica set (start,
load, unload, drain: ``replicas.py``). Every decision is counted in
``shunter_capacity_decisions_total`` and sets ``shunter_capacity_desired_replicas``; every one
that changes something (or starts being held back by a cap), each operator change and each
override's expiry is an audit-log entry. When a model may scale to zero, a second job checks
every second for requests held at zero (``shunter_capacity_held_requests``) and runs a decision
at once, so a cold model starts without waiting out the period. A tick whose gateways all fail
to answer decides nothing; so does one where gateways are discovered (Kubernetes mode: the
gateway pods behind their Service) and none is found.

Operators change bounds (``set_bounds``) and add expiring overrides (``override``); both are
held in memory (a restart returns to ``capacity.yaml``) and audited with actor and reason.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import httpx
from apscheduler.schedulers.background import BackgroundScheduler

from control.capacity.metrics import CapacityMetrics
from control.capacity.signals import Reading, SignalHistory
from control.capacity.snapshot import ReplicaCounts, active_models, build_snapshot, rate_window_s
from control.capacity.source import ReplicaSource
from control.errors import ControlError
from control.registry import Registry
from scheduling.autoscaling import (
    Action,
    AutoscalingConfig,
    ControllerState,
    Override,
    PoolModel,
    ScaleDecision,
    Snapshot,
    decide,
)
from settings.capacity import CapacitySettings
from settings.control import ReplicaSettings
from settings.stack import StackConfig

log = logging.getLogger(__name__)
ACTOR = "capacity-controller"
HELD_CHECK_S = 1.0
MAX_OVERRIDE_S = 7 * 24 * 3600.0


class CapacityError(ControlError):
    """An operator's capacity change is refused (``status``, ``code``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class CapacityController:
    """See the module docstring. Thread-safe: ticks run one at a time."""

    def __init__(self, settings: CapacitySettings, stack: StackConfig, replicas: ReplicaSource,
                 gateway_urls: Sequence[str] | Callable[[], Sequence[str]], registry: Registry,
                 replica_settings: ReplicaSettings, clock: Callable[[], float] = time.time) -> None:
        self.config: AutoscalingConfig = settings.policy
        self.slots = settings.slots
        self.stack, self.replicas, self.registry = stack, replicas, registry
        self._gateway_urls = gateway_urls
        self._settings, self._clock = replica_settings, clock
        self.state = ControllerState()
        self.metrics = CapacityMetrics()
        keep_s = max(self.config.burn_long_window_s, rate_window_s(self.config)) + 2 * self.config.period_s
        self.history = SignalHistory(keep_s)
        now = clock()
        self.last_active = {m: now for m in self.config.models}
        self.snapshot: Snapshot | None = None
        self.gateway_error: str | None = None
        self.last_tick_s: float | None = None
        self._tick_lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    # ---- the loop --------------------------------------------------------------------------------

    def start(self) -> None:
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(self.run_once, "interval", seconds=self.config.period_s, id="capacity",
                                max_instances=1, coalesce=True)
        if any(policy.scale_to_zero for policy in self.config.models.values()):
            self._scheduler.add_job(self._check_held, "interval", seconds=HELD_CHECK_S, id="capacity-held",
                                    max_instances=1, coalesce=True)
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None

    def run_once(self) -> tuple[ScaleDecision, ...]:
        """One tick; see the module docstring. Returns the decisions (none when no gateway answered)."""
        with self._tick_lock:
            now = self._clock()
            reading = self._scrape(now)
            if reading is None:
                return ()
            self.history.add(reading)
            for model in active_models(self.history, self.config):
                self.last_active[model] = now
            idle = {m: max(0.0, now - self.last_active.get(m, now)) for m in self.config.models}
            counts = {key: self.replicas.counts(key.pool, key.model) for key in self.config.targets}
            self.snapshot = build_snapshot(self.history, self.config, self.stack, counts, idle,
                                           self._settings.error_budget)
            before = self.state
            decisions, self.state = decide(self.snapshot, self.config, before, now)
            self._audit_expired(before, now)
            for decision in decisions:
                self._apply(decision, before.last.get(decision.key), counts[decision.key])
            self.last_tick_s = now
            self.refresh_metrics()
            return decisions

    @property
    def gateway_urls(self) -> list[str]:
        """The gateways now (on a cluster: the gateway pods the Service resolves to at this moment)."""
        urls = self._gateway_urls
        return list(urls() if callable(urls) else urls)

    def _scrape(self, now: float) -> Reading | None:
        reading, errors = Reading(now), []
        gateway_urls = self.gateway_urls
        with httpx.Client(timeout=self._settings.gateway_timeout_s) as client:
            for url in gateway_urls:
                try:
                    response = client.get(f"{url.rstrip('/')}/metrics")
                    response.raise_for_status()
                    reading.add(response.text)
                except (httpx.HTTPError, ValueError) as exc:
                    errors.append(f"{url}: {exc}")
        if not gateway_urls and callable(self._gateway_urls):
            errors.append("no gateway pod found")  # a cluster with its gateways down: no demand to read
        self.gateway_error = "; ".join(errors) or None
        if errors and len(errors) >= len(gateway_urls):
            log.warning("capacity: no gateway answered; no decision this tick (%s)", self.gateway_error)
            return None
        return reading

    def _check_held(self) -> None:
        """Decide at once when requests are held for a model with no replica ready or starting."""
        if self._tick_lock.locked():
            return
        reading = self._scrape(self._clock())
        if reading is None:
            return
        for model, held in reading.held.items():
            keys = [k for k in self.config.targets if k.model == model]
            if held > 0 and keys and all(self._current(k) == 0 for k in keys):
                self.run_once()
                return

    def _current(self, key: PoolModel) -> int:
        counts = self.replicas.counts(key.pool, key.model)
        return counts.ready + counts.starting

    def _apply(self, decision: ScaleDecision, previous: ScaleDecision | None, counts: ReplicaCounts) -> None:
        key = decision.key
        self.metrics.record(decision, counts)
        if decision.desired != counts.ready + counts.starting:
            self.replicas.scale(key.pool, key.model, decision.desired)
        newly_capped = decision.capped_by_budget and not (previous is not None and previous.capped_by_budget)
        if decision.action is not Action.HOLD or newly_capped:
            self.registry.audit(ACTOR, "capacity.decision", key.model, decision.reason.value,
                                decision_json(decision, self._clock()))

    def _audit_expired(self, before: ControllerState, now: float) -> None:
        for key, override in before.overrides.items():
            if key not in self.state.overrides and not override.live(now):
                self.registry.audit(ACTOR, "capacity.override_expired", key.model, override.reason,
                                    {"pool": key.pool, **override_json(override)})

    def refresh_metrics(self) -> None:
        """Replica counts and cold starts as they are now (between ticks too)."""
        for key in self.config.targets:
            self.metrics.set_counts(key, self.replicas.counts(key.pool, key.model))
        self.metrics.record_cold_starts(dict(self.replicas.cold_starts))

    # ---- operator changes ------------------------------------------------------------------------

    def key(self, model: str, pool: str) -> PoolModel:
        key = PoolModel(pool, model)
        if key not in self.config.targets:
            known = ", ".join(str(k) for k in sorted(self.config.targets, key=str)) or "none"
            raise CapacityError(404, "not_controlled", f"{pool}/{model} is not controlled by capacity.yaml "
                                                       f"(controlled: {known})")
        return key

    def set_bounds(self, model: str, pool: str, min_replicas: int, max_replicas: int, actor: str,
                   reason: str) -> dict[str, Any]:
        """Change the warm minimum and the maximum of one (pool, model); audited."""
        key = self.key(model, pool)
        if not 0 <= min_replicas <= max_replicas:
            raise CapacityError(422, "invalid_bounds", f"need 0 <= min ({min_replicas}) <= max ({max_replicas})")
        self._check_slots(pool, max_replicas, "max")
        policy = self.config.models[model]
        if policy.scale_to_zero and min_replicas > 0:
            raise CapacityError(422, "invalid_bounds", f"{model} scales to zero: it has no warm minimum "
                                                       "(min must be 0)")
        with self._tick_lock:
            old = self.config.targets[key]
            new = dataclasses.replace(old, min_replicas=min_replicas, max_replicas=max_replicas)
            targets = MappingProxyType({**self.config.targets, key: new})
            self.config = dataclasses.replace(self.config, targets=targets)
        details = {"pool": pool, "old": {"min_replicas": old.min_replicas, "max_replicas": old.max_replicas},
                   "new": {"min_replicas": min_replicas, "max_replicas": max_replicas}}
        self.registry.audit(actor, "capacity.set", model, reason, details)
        self._tick_soon()
        return details

    def override(self, model: str, pool: str, replicas: int, for_s: float, actor: str, reason: str) -> dict[str, Any]:
        """An expiring replica count above every cap; audited."""
        key = self.key(model, pool)
        if replicas < 0 or not 0 < for_s <= MAX_OVERRIDE_S:
            raise CapacityError(422, "invalid_override", f"need replicas >= 0 and 0 < for <= {MAX_OVERRIDE_S:.0f} s")
        if not reason.strip():
            raise CapacityError(422, "reason_required", "an override needs a reason (for the audit log)")
        self._check_slots(pool, replicas, "replicas")
        with self._tick_lock:
            override = Override(key, replicas, self._clock() + for_s, reason, actor)
            self.state = self.state.with_override(override)
        self.registry.audit(actor, "capacity.override", model, reason, {"pool": pool, **override_json(override)})
        self._tick_soon()
        return override_json(override)

    def _check_slots(self, pool: str, replicas: int, field: str) -> None:
        slots = self.slots.get(pool, 0)
        if replicas > slots:
            raise CapacityError(422, "beyond_slots", f"{field} {replicas} > the {slots} worker slots pool {pool} "
                                                     "reserves ports for (raise max_replicas in capacity.yaml)")

    def _tick_soon(self) -> None:
        threading.Thread(target=self.run_once, name="capacity-tick", daemon=True).start()

    # ---- status ----------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """What ``shunter scale status`` shows; see ``cli/scale.py``."""
        now = self._clock()
        rows = []
        for key in sorted(self.config.targets, key=lambda k: (k.model, k.pool)):
            rows.append(self._row(key, now))
        return {"period_s": self.config.period_s, "scale_down_window_s": self.config.scale_down_window_s,
                "last_tick_s": self.last_tick_s, "gateway_error": self.gateway_error,
                "cold_start_s": self.replicas.cold_start_s(), "errors": list(self.replicas.errors), "rows": rows}

    def _row(self, key: PoolModel, now: float) -> dict[str, Any]:
        target, policy = self.config.targets[key], self.config.models[key.model]
        counts = self.replicas.counts(key.pool, key.model)
        last = self.state.last.get(key)
        override = self.state.overrides.get(key)
        signals = None
        if self.snapshot is not None:
            signals = {**_fields(self.snapshot.model(key.model)), **_fields(self.snapshot.pool(key))}
        cold = self.replicas.cold_starts.get((key.pool, key.model))
        return {
            "pool": key.pool, "model": key.model, "min_replicas": target.min_replicas,
            "max_replicas": target.max_replicas, "scale_to_zero": policy.scale_to_zero, "idle_s": policy.idle_s,
            "desired": last.desired if last is not None else counts.ready + counts.starting,
            "ready": counts.ready, "starting": counts.starting, "draining": counts.draining,
            "signals": signals, "last_decision": None if last is None else decision_json(last, self.last_tick_s),
            "capped_by_budget": bool(last is not None and last.capped_by_budget),
            "cap": last.reason.value if last is not None and last.capped_by_budget else None,
            "override": None if override is None or not override.live(now) else override_json(override),
            "last_cold_start_s": None if cold is None else round(cold, 3),
        }


def decision_json(decision: ScaleDecision, at_s: float | None = None) -> dict[str, Any]:
    """A decision as JSON; ``at_s`` (epoch s) when the decision does not carry its own time."""
    return {"pool": decision.key.pool, "model": decision.key.model, "action": decision.action.value,
            "reason": decision.reason.value, "current": decision.current, "desired": decision.desired,
            "recommended": decision.recommended, "capped_by_budget": decision.capped_by_budget,
            "at_s": decision.at_s or at_s, "numbers": _finite(dict(decision.numbers))}


def override_json(override: Override) -> dict[str, Any]:
    return {"replicas": override.replicas, "expires_at_s": override.expires_at_s, "reason": override.reason,
            "actor": override.actor}


def _fields(item: object) -> dict[str, Any]:
    """The scalar fields of a signals dataclass (JSON-safe), regions as a sorted list."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(item):  # type: ignore[arg-type]
        value = getattr(item, f.name)
        if isinstance(value, frozenset):
            out[f.name] = sorted(value)
        elif value is None or isinstance(value, int | float | str):
            out[f.name] = value
    out.pop("model", None)
    return _finite(out)


def _finite(values: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe: non-finite floats become None."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in values.items()}
