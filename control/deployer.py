"""Put exactly a set of verified versions of a model on every Triton worker that serves it.

``stage(model, version)`` returns the version's verified copy (``control/verified_copies.py``):
the one verified when it was registered or staged before, reused as it is, or else downloaded
from the store and checked against its signed SHA-256 manifest and the manifest digest the
registry recorded. A tampered, unsigned or incomplete artifact raises ``DeployError`` with the
integrity code, marks the version ``failed`` in the registry and leaves serving exactly as it was.
A version whose runtime requirements (GPU types, memory, quantization) no pool serving its model
meets is refused first: ``DeployError("requirements_unmet")`` names each pool and why (the pools'
capacity profiles from ``scheduling.yaml``, ``profiles``; a pool without one is checked on its
GPU type only).

``serve(model, versions)`` renders the model's repository directory with a version policy
listing exactly ``versions`` (atomic swap), reloads the model on every worker serving it and
waits until each worker has exactly those versions READY, then sends one warm request to each
new version on each worker. If any step fails, the previous versions are rendered and reloaded
and ``DeployError`` is raised: the workers end up serving what they served before. Calls are
serialised by a lock (one repository, one writer).

Where the workers are and where the repository lives are two seams: ``discover`` (default: the
fixed ``workers``) is called before each load, so Kubernetes pods that came or went are seen
(``control/remote_workers.py``); ``publish`` (default: none, the workers read the local
directory) switches to one repository per pool, rendered for the pool's GPU type into
``repository/<pool>/`` and published with the Triton model names under ``<pool>/`` where that
pool's workers read (``control/s3_repository.py``), before any worker is asked to load.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from control.artifacts import ArtifactStoreError
from control.errors import ControlError
from control.integrity import IntegrityError
from control.registry import Registry, RuntimeRequirements, VersionState
from control.repository import RenderError, render_model
from control.triton_control import TritonControlError, load, wait_versions, warm_request
from control.verified_copies import VerifiedCopies
from scheduling.capacity import CapacityProfile
from scheduling.requirements import VersionNeeds
from settings.control import RolloutSettings
from settings.stack import ModelSpec, StackConfig
from settings.workers import WorkerAddress

ACTOR = "control"


class DeployError(ControlError, RuntimeError):
    """A version could not be staged or served; ``code`` says why (an integrity code, ``store``,
    ``render``, ``publish``, ``load``, ``not_registered``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Deployer:
    registry: Registry
    copies: VerifiedCopies
    config: StackConfig
    repository: Path
    workers: Sequence[WorkerAddress]
    settings: RolloutSettings
    gpu_type: str = "cpu"
    served: dict[str, frozenset[int]] = field(default_factory=dict)
    discover: Callable[[], Sequence[WorkerAddress]] | None = None
    publish: Callable[[Path, Sequence[str], str], None] | None = None  # (dir, names, pool)
    profiles: Mapping[str, CapacityProfile] = field(default_factory=dict)  # scheduling.yaml's, by name
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def spec(self, model: str) -> ModelSpec:
        spec = self.config.model(model)
        if spec is None:
            raise DeployError("not_configured", f"model {model} is not in models.yaml")
        return spec

    def check_requirements(self, model: str, version: int, requirements: RuntimeRequirements) -> None:
        """Raise ``DeployError("requirements_unmet")`` when no pool serving ``model`` meets them."""
        needs = VersionNeeds(frozenset(requirements.gpu_types), requirements.min_gpu_memory_gb,
                             requirements.quantization)
        reasons = []
        for pool in self.config.pools:
            if model not in pool.models:
                continue
            reason = needs.unmet_by(pool.gpu_type, self.profiles.get(pool.profile_name))
            if reason is None:
                return
            reasons.append(f"pool {pool.name}: {reason}")
        if reasons:  # (a model no pool serves has nothing to check here)
            raise DeployError("requirements_unmet", f"{model} version {version} runs on no pool serving it: "
                                                    + "; ".join(reasons))

    def workers_of(self, model: str) -> list[WorkerAddress]:
        """The workers serving ``model``: those of the pools its deployment names (all pools
        serving it when it has no deployment record)."""
        deployment = self.registry.deployment(model)
        pools = set(deployment.pools) if deployment is not None else None
        workers = self.discover() if self.discover is not None else self.workers
        return [w for w in workers if model in w.models and (pools is None or w.pool in pools)]

    def render(self, model: str, sources: dict[int, Path]) -> None:
        """Render ``model`` serving exactly ``sources`` and publish it where the workers read."""
        if self.publish is None:
            render_model(self.spec(model), sources, self.repository, self.gpu_type)
            return
        deployment = self.registry.deployment(model)
        for pool in self.config.pools:
            if model in pool.models and (deployment is None or pool.name in deployment.pools):
                names = render_model(self.spec(model), sources, self.repository / pool.name, pool.gpu_type)
                try:
                    self.publish(self.repository / pool.name, names, pool.name)
                except ArtifactStoreError as exc:
                    raise DeployError("publish", f"{model}: publishing pool {pool.name}'s repository failed: "
                                                 f"{exc}") from exc

    def stage(self, model: str, version: int) -> Path:
        """The verified directory of ``version``; see the module docstring."""
        record = self.registry.version(model, version)
        if record is None:
            raise DeployError("not_registered", f"{model} version {version} is not registered")
        self.check_requirements(model, version, record.requirements)
        try:
            path = self.copies.copy_of(record)
        except IntegrityError as exc:
            self.registry.set_version_state(model, version, VersionState.FAILED, ACTOR,
                                            f"integrity check failed: {exc}", {"code": exc.code})
            raise DeployError(exc.code, f"{model} v{version} refused: {exc}") from exc
        except ArtifactStoreError as exc:
            raise DeployError("store", f"{model} v{version}: artifact store: {exc}") from exc
        if record.state is VersionState.REGISTERED:
            self.registry.set_version_state(model, version, VersionState.VERIFIED, ACTOR,
                                            "manifest and signature checked")
        return path

    def serve(self, model: str, versions: Iterable[int], reason: str = "") -> None:
        """Make exactly ``versions`` of ``model`` READY on its workers; see the module docstring."""
        wanted = frozenset(versions)
        with self._lock:
            previous = self.served.get(model)
            sources = {v: self.stage(model, v) for v in sorted(wanted)}
            try:
                self._apply(model, sources)
                for version in wanted - (previous or frozenset()):
                    self._warm(model, version)
            except (DeployError, TritonControlError, RenderError) as exc:
                if previous is not None and previous != wanted:
                    self._restore(model, previous)
                for version in sorted(wanted - (previous or frozenset())):
                    self.registry.set_version_state(model, version, VersionState.FAILED, ACTOR,
                                                    f"failed to load or warm up: {exc}"[:1000])
                raise DeployError("load", f"{model} {sorted(wanted)}: {exc}; serving left at "
                                          f"{sorted(previous or [])}") from exc
            self.served[model] = wanted
            self._record_states(model, previous or frozenset(), wanted, reason)

    def _apply(self, model: str, sources: dict[int, Path]) -> None:
        self.render(model, sources)
        workers = self.workers_of(model)
        for worker in workers:
            load(worker, model, self.settings.ready_timeout_s)
        wait_versions(workers, model, set(sources), self.settings.ready_timeout_s)

    def _warm(self, model: str, version: int) -> None:
        for worker in self.workers_of(model):
            warm_request(worker, self.spec(model), version)

    def _restore(self, model: str, previous: frozenset[int]) -> None:
        try:
            self._apply(model, {v: self.stage(model, v) for v in previous})
        except (DeployError, TritonControlError, RenderError) as exc:  # reported with the original error
            self.registry.audit(ACTOR, "deploy.restore_failed", model, str(exc), {"versions": sorted(previous)})

    def _record_states(self, model: str, previous: frozenset[int], wanted: frozenset[int], reason: str) -> None:
        for version in sorted(wanted - previous):
            self.registry.set_version_state(model, version, VersionState.READY, ACTOR, reason or "loaded and warmed")
        for version in sorted(previous - wanted):
            record = self.registry.version(model, version)
            if record is not None and record.state is not VersionState.FAILED:  # a failure stays on record
                self.registry.set_version_state(model, version, VersionState.RETIRED, ACTOR, reason or "unloaded")
