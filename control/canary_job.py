"""The canary analysis as an apscheduler job: every ``interval_s``, read the gateways' per-version
metrics, judge each running canary against its baseline over the sliding window
(``canary_analysis.judge``) and roll the candidate back on a breach, with the verdict's numbers
in the audit log. The last verdict per model is kept, with its rollout's id, for ``rollout status``. A run that finds an
operator action in progress on the model skips it (the action holds the model's lock).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from control.canary_analysis import MetricsHistory, Thresholds, Verdict, VersionWindow, judge
from control.deployer import DeployError
from control.gateway_probe import GatewayProbeError, read, summed_counters
from control.registry import RolloutRecord, RolloutStatus
from control.rollouts import RolloutError, RolloutManager

log = logging.getLogger(__name__)
ACTOR = "canary-analysis"


@dataclass
class CanaryAnalysis:
    manager: RolloutManager
    history: MetricsHistory
    verdicts: dict[str, tuple[int, Verdict]] = field(default_factory=dict)  # model -> (rollout id, verdict)
    _scheduler: BackgroundScheduler | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self, interval_s: float) -> None:
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(self.run_once, "interval", seconds=interval_s, id="canary-analysis",
                                max_instances=1, coalesce=True)
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)

    def windows(self, model: str, versions: list[int]) -> dict[int, VersionWindow]:
        with self._lock:
            return {v: self.history.window(model, v) for v in versions}

    def run_once(self) -> None:
        """One analysis pass over every running canary; see the module docstring."""
        urls = self.manager.gateways()
        if not urls:
            return
        try:
            counters = summed_counters(read(urls, headers=self.manager.probe_headers))
        except GatewayProbeError as exc:
            log.warning("canary analysis: %s", exc)
            return
        with self._lock:
            self.history.add(time.monotonic(), counters)
        for model in self.manager.registry.models():
            rollout = self.manager.registry.active_rollout(model)
            if rollout is not None and rollout.kind == "canary" and rollout.status is RolloutStatus.RUNNING:
                self._judge(rollout)

    def _judge(self, rollout: RolloutRecord) -> None:
        assert rollout.baseline_version is not None
        candidate = next(v for v in rollout.variants if v != rollout.baseline_version)
        windows = self.windows(rollout.model, [rollout.baseline_version, candidate])
        verdict = judge(windows[rollout.baseline_version], windows[candidate],
                        Thresholds.from_dict(rollout.thresholds))
        self.verdicts[rollout.model] = (rollout.id, verdict)
        if verdict.decision != "rollback":
            return
        lock = self.manager.lock(rollout.model)
        if lock.locked():
            return  # an operator action is running; judge again next pass
        details: dict[str, Any] = {"verdict": verdict.as_dict(), "candidate": candidate}
        try:
            self.manager.rollback(rollout.model, ACTOR, f"automatic: {verdict.reason}", details, failed=True)
        except (RolloutError, GatewayProbeError, DeployError) as exc:
            log.error("canary analysis: rollback of %s failed: %s", rollout.model, exc)
