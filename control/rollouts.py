"""Rollouts: canaries, A/B tests, promote, pause, resume and rollback of a model's versions.

Order of operations, so that no request is lost and weights only point at READY versions:
- start (canary or A/B): verify and load the new versions next to the live one and warm them
  (``Deployer.serve``), record the rollout, then set the alias weights and wait until every
  gateway runs the new routing generation;
- promote / rollback: move the weights first (the leaving versions keep weight 0 but stay
  loaded), wait until every gateway runs them, wait until no request is bound to a leaving
  version any more (drain), then unload it;
- pause sends all traffic back to the baseline and keeps the candidate loaded; resume restores
  the rollout's weights.
Every step is written to the audit log by the registry, with the numbers behind automatic
decisions in ``details``. Operations on one model are serialised by a lock; the canary analysis
(``canary_job.py``) calls ``rollback`` with ``actor="canary-analysis"``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control.deployer import Deployer, DeployError
from control.errors import ControlError
from control.gateway_probe import GatewayReading, wait_until
from control.registry import (
    AliasRecord,
    Registry,
    RegistryConflictError,
    RegistryValidationError,
    RolloutRecord,
    RolloutStatus,
    VersionState,
    validate_weights,
)
from settings.control import CanarySettings, RolloutSettings


class RolloutError(ControlError, RuntimeError):
    """A rollout action cannot be done; ``code`` names why, for the admin API's error body."""

    def __init__(self, code: str, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.code, self.status = code, status


@dataclass
class RolloutManager:
    registry: Registry
    deployer: Deployer
    gateway_urls: Sequence[str] | Callable[[], Sequence[str]]  # a callable is asked before each wait
    settings: RolloutSettings
    canary: CanarySettings
    probe_headers: Mapping[str, str] = field(default_factory=dict)  # for the gateways' /metrics
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lock(self, model: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(model, threading.Lock())

    def _baseline(self, model: str) -> int:
        alias = self.registry.alias(model)
        if alias is None:
            raise RolloutError("no_alias", f"model {model} has no live version", 404)
        live = [v for v, w in alias.weights.items() if w > 0]
        if len(live) != 1 or alias.weights[live[0]] != 100.0:
            raise RolloutError("not_settled", f"model {model} is split {alias.weights}; finish that first")
        return live[0]

    def start_canary(self, model: str, to: int, percent: float, sticky: str, actor: str,
                     reason: str = "") -> dict[str, Any]:
        if not 0 < percent < 100:
            raise RolloutError("bad_percent", "the canary percent must be between 0 and 100", 422)
        return self._start(model, "canary", {to: percent}, sticky, actor, reason)

    def start_ab(self, model: str, variants: Mapping[int, float], sticky: str, actor: str,
                 reason: str = "") -> dict[str, Any]:
        return self._start(model, "ab", dict(variants), sticky, actor, reason)

    def _start(self, model: str, kind: str, candidates: dict[int, float], sticky: str, actor: str,
               reason: str) -> dict[str, Any]:
        with self.lock(model):
            if self.registry.active_rollout(model) is not None:
                raise RolloutError("rollout_active", f"model {model} already has an active rollout")
            baseline = self._baseline(model)
            weights = dict(candidates)
            weights[baseline] = weights.get(baseline, 0.0) + 100.0 - sum(candidates.values())
            if baseline in candidates and kind == "canary":
                raise RolloutError("same_version", f"version {baseline} is already live")
            try:
                weights = validate_weights(weights)
            except RegistryValidationError as exc:
                raise RolloutError("bad_weights", str(exc), 422) from exc
            started = time.monotonic()
            try:
                self.deployer.serve(model, weights, reason=f"{kind} of {model}")
            except DeployError as exc:
                self.registry.audit(actor, f"{kind}.refused", model, str(exc), {"code": exc.code,
                                                                                "versions": sorted(weights)})
                raise RolloutError(exc.code, str(exc), 422) from exc
            deploy_s = time.monotonic() - started
            try:
                rollout = self.registry.start_rollout(model, kind, baseline, weights, sticky,
                                                      self.canary.thresholds(), actor, reason)
            except RegistryConflictError as exc:
                raise RolloutError("rollout_active", str(exc)) from exc
            alias = self.registry.set_alias(model, weights, sticky, actor, f"{kind}.weights", reason,
                                            {"rollout_id": rollout.id})
            routing_s = self._await_routing(alias)
            return {"rollout_id": rollout.id, "deploy_s": deploy_s, "routing_applied_s": routing_s}

    def promote(self, model: str, actor: str, reason: str = "", to: int | None = None) -> dict[str, Any]:
        """All traffic to ``to`` (an A/B test's winner, any of its variants) or, by default, the
        candidate with the largest weight; the other versions drain and unload."""
        with self.lock(model):
            rollout = self._active(model)
            if to is not None and to not in rollout.variants:
                raise RolloutError("not_in_rollout", f"v{to} is not one of rollout {rollout.id}'s versions "
                                                     f"({', '.join(f'v{v}' for v in sorted(rollout.variants))})", 422)
            winner = to if to is not None else max((v for v in rollout.variants if v != rollout.baseline_version),
                                                    key=lambda v: rollout.variants[v])
            return self._settle(model, rollout, winner, RolloutStatus.PROMOTED, "rollout.promote", actor, reason,
                                {"winner": winner})

    def rollback(self, model: str, actor: str, reason: str = "",
                 details: Mapping[str, Any] | None = None, failed: bool = False) -> dict[str, Any]:
        """All traffic back to the baseline; with ``failed`` (the canary analysis judged the
        candidates worse) the candidates end ``failed`` with ``reason``, not ``retired``."""
        with self.lock(model):
            rollout = self._active(model)
            assert rollout.baseline_version is not None
            if failed:
                for version in sorted(v for v in rollout.variants if v != rollout.baseline_version):
                    self.registry.set_version_state(model, version, VersionState.FAILED, actor, reason)
            return self._settle(model, rollout, rollout.baseline_version, RolloutStatus.ROLLED_BACK,
                                "rollout.rollback", actor, reason, dict(details or {}))

    def pause(self, model: str, actor: str, reason: str = "") -> dict[str, Any]:
        with self.lock(model):
            rollout = self._active(model)
            assert rollout.baseline_version is not None
            weights = {v: (100.0 if v == rollout.baseline_version else 0.0) for v in rollout.variants}
            alias = self.registry.set_alias(model, weights, rollout.sticky, actor, "rollout.pause", reason)
            self.registry.update_rollout(rollout.id, actor=actor, action="rollout.paused", status=RolloutStatus.PAUSED,
                                         reason=reason)
            return {"routing_applied_s": self._await_routing(alias)}

    def resume(self, model: str, actor: str, reason: str = "") -> dict[str, Any]:
        with self.lock(model):
            rollout = self._active(model)
            alias = self.registry.set_alias(model, rollout.variants, rollout.sticky, actor, "rollout.resume", reason)
            self.registry.update_rollout(rollout.id, actor=actor, action="rollout.resumed",
                                         status=RolloutStatus.RUNNING, reason=reason)
            return {"routing_applied_s": self._await_routing(alias)}

    def _active(self, model: str) -> RolloutRecord:
        rollout = self.registry.active_rollout(model)
        if rollout is None:
            raise RolloutError("no_rollout", f"model {model} has no active rollout", 404)
        return rollout

    def undo(self, model: str, actor: str, reason: str = "", to: int | None = None) -> dict[str, Any]:
        """Bring back the version that was live before the last promote (or version ``to``) at any
        time after a rollout ended: load and warm it next to the live one, move all traffic to it,
        drain and unload the other (audit ``rollout.undo``)."""
        with self.lock(model):
            if self.registry.active_rollout(model) is not None:
                raise RolloutError("rollout_active", f"model {model} has an active rollout; roll it back instead")
            live = self._baseline(model)
            target = self.previous_version(model, live) if to is None else to
            if target == live:
                raise RolloutError("same_version", f"version {target} of {model} is already live")
            alias = self.registry.alias(model)
            sticky = alias.sticky if alias is not None else "request"
            started = time.monotonic()
            try:
                self.deployer.serve(model, [live, target], reason=f"undo of {model}: load v{target}")
            except DeployError as exc:
                self.registry.audit(actor, "rollout.undo.refused", model, str(exc), {"code": exc.code, "to": target})
                raise RolloutError(exc.code, str(exc), 422) from exc
            timings = self._shift_all(model, [live, target], target, sticky, actor, "rollout.undo", reason,
                                      {"from": live, "to": target})
            return {**timings, "from": live, "to": target, "total_s": time.monotonic() - started}

    def previous_version(self, model: str, live: int) -> int:
        """The baseline of the newest promoted rollout that made ``live`` the live version."""
        for rollout in self.registry.rollouts(model, limit=100):
            if (rollout.status is RolloutStatus.PROMOTED and rollout.baseline_version not in (None, live)
                    and live in rollout.variants):
                assert rollout.baseline_version is not None
                return rollout.baseline_version
        raise RolloutError("no_previous_version", f"no promote made v{live} of {model} live; name the version to "
                                                  "bring back (`shunter rollout undo MODEL --to N`)")

    def _settle(self, model: str, rollout: RolloutRecord, keep: int, status: RolloutStatus, action: str,
                actor: str, reason: str, details: dict[str, Any]) -> dict[str, Any]:
        """All traffic to ``keep``; drain and unload the other versions; end the rollout."""
        started = time.monotonic()
        timings = self._shift_all(model, [*rollout.variants, keep], keep, rollout.sticky, actor, action, reason,
                                  {**details, "rollout_id": rollout.id})
        final = {v: (100.0 if v == keep else 0.0) for v in {*rollout.variants, keep}}
        self.registry.update_rollout(rollout.id, actor=actor, action=f"{action}.done", status=status, reason=reason,
                                     variants=final, details={**details, **timings})
        return {**timings, "total_s": time.monotonic() - started}

    def _shift_all(self, model: str, versions: Sequence[int], keep: int, sticky: str, actor: str, action: str,
                   reason: str, details: dict[str, Any]) -> dict[str, Any]:
        """Weights to ``keep`` only, wait for every gateway's routing, drain the other versions, unload
        them; return the seconds each wait took."""
        weights = {v: (100.0 if v == keep else 0.0) for v in {*versions, keep}}
        alias = self.registry.set_alias(model, weights, sticky, actor, action, reason, details)
        routing_s = self._await_routing(alias)
        leaving = sorted(v for v in weights if v != keep)
        drain_s = self._await_drained(model, leaving)
        self.deployer.serve(model, [keep], reason=f"{action}: {reason}" if reason else action)
        self.registry.set_alias(model, {keep: 100.0}, sticky, actor, f"{action}.unloaded", reason,
                                {**details, "unloaded": leaving})
        return {"routing_applied_s": routing_s, "drain_s": drain_s}

    def gateways(self) -> list[str]:
        """The gateways to wait for now (Kubernetes: the gateway pods' addresses at this moment)."""
        return list(self.gateway_urls() if callable(self.gateway_urls) else self.gateway_urls)

    def _await_routing(self, alias: AliasRecord) -> float | None:
        """Seconds until every gateway runs a routing generation at least the registry's now."""
        urls = self.gateways()
        if not urls:
            return None
        generation = self.registry.routing_generation()
        def applied(readings: list[GatewayReading]) -> bool:
            return all(r.routing_generation is not None and r.routing_generation >= generation for r in readings)
        return wait_until(urls, f"routing generation {generation} ({alias.model} {alias.weights})",
                          applied, self.settings.routing_applied_timeout_s, headers=self.probe_headers)

    def _await_drained(self, model: str, versions: list[int]) -> float | None:
        """Seconds until no gateway holds a request bound to any of ``versions``."""
        urls = self.gateways()
        if not urls or not versions:
            return None
        keys = {(model, str(v)) for v in versions}
        def drained(readings: list[GatewayReading]) -> bool:
            return all(r.open_requests.get(k, 0.0) <= 0 for r in readings for k in keys)
        return wait_until(urls, f"{model} versions {versions} drained", drained,
                          self.settings.drain_timeout_s, poll_s=0.2, headers=self.probe_headers)
