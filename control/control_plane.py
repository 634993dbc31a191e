"""The control plane's composition root: registry, artifact store, keys, deployer, rollouts and
the canary analysis, built once from ``control.yaml`` and the stack configuration.

``ControlPlane.open(paths, config, gateway_urls)`` migrates the registry and makes sure the key
that signs locally built artifacts exists and is trusted. ``bootstrap(artifacts_dir)`` runs before
the workers start: each configured model whose registry has no version gets its locally built
artifact pushed as its configured version (signed manifest, into the store, registered) and an
alias at 100 %; then every model's live versions (its alias) are staged (their verified copies,
downloaded and verified only when missing) and rendered into the Triton repository, the one render
at start, so workers start (and restart) on exactly what the registry says is live.

``control.yaml``'s ``mode`` picks where the workers are. ``local`` (the default): the local stack's
supervisor starts them and they read the repository directory. ``kubernetes``: control starts
nothing; every render is published to the S3 repository the pods read, and the workers of a pool
are the addresses its headless Service resolves to at each load (``control/remote_workers.py``;
``resolver`` is the seam tests feed), as are the gateways when ``gateway_host`` is set. There
``bootstrap`` also loads the live versions on the pods already running (a model pushed since the
last start gets its alias at its configured version then).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from control.artifacts import ArtifactStore, open_store
from control.canary_analysis import MetricsHistory
from control.canary_job import CanaryAnalysis
from control.deployer import Deployer, DeployError
from control.integrity import (
    TrustedKeyDirectory,
    generate_keypair,
    load_private_key,
    load_trusted_keys,
    signer_key_id,
    verify_directory,
)
from control.registry import Registry, RuntimeRequirements, VersionState
from control.remote_workers import DnsResolver, Resolver, pool_workers, service_urls
from control.requirements import runtime_requirements
from control.rollouts import RolloutManager
from control.s3_repository import S3Repository
from control.signed_copy import signed_copy
from control.verified_copies import VerifiedCopies
from scheduling.capacity import CapacityProfile
from settings.control import ControlSettings, KubernetesSettings, load_control_settings
from settings.gateway import load_gateway_settings, read_metrics_token
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import ModelSpec, StackConfig
from settings.workers import worker_addresses

ACTOR = "control"
log = logging.getLogger(__name__)


def ensure_signing_key(settings: ControlSettings) -> None:
    """Create the local build key on first use and trust its public half."""
    private = settings.local_signing_key
    public = private.with_suffix(".pub")
    if not private.exists():
        private.parent.mkdir(parents=True, exist_ok=True)
        generate_keypair(private, public)
    settings.trusted_keys_dir.mkdir(parents=True, exist_ok=True)
    trusted_copy = settings.trusted_keys_dir / public.name
    if not trusted_copy.exists():
        shutil.copy2(public, trusted_copy)


def push_directory(store: ArtifactStore, registry: Registry, source: Path, spec: ModelSpec, version: int,
                   requirements: RuntimeRequirements, key_path: Path, actor: str, reason: str) -> None:
    """Sign a copy of ``source`` (the original is not written to), upload it, register it."""
    with signed_copy(source, spec.name, version, load_private_key(key_path)) as (staged, manifest):
        uri = store.upload_directory(staged, spec.name, version)
        registry.register_version(spec.name, version, uri, manifest.digest(), signer_key_id(staged),
                                  requirements, actor, reason)


@dataclass
class ControlPlane:
    settings: ControlSettings
    config: StackConfig
    paths: StackPaths
    registry: Registry
    store: ArtifactStore
    deployer: Deployer
    rollouts: RolloutManager
    canary: CanaryAnalysis

    @classmethod
    def open(cls, paths: StackPaths, config: StackConfig, gateway_urls: Sequence[str] = (),
             resolver: Resolver | None = None) -> ControlPlane:
        """Open the plane in the mode ``control.yaml`` names; ``resolver`` (Kubernetes mode only,
        default the system's DNS) finds the pods behind each pool's and the gateways' Service."""
        settings = load_control_settings(paths.control_file, paths.state_dir)
        if settings.mode == "local":  # on a cluster, artifacts come signed by their publishers' keys
            ensure_signing_key(settings)
        registry = Registry.open(settings.registry_url)
        store = open_store(settings.artifact_store)
        trusted = TrustedKeyDirectory(settings.trusted_keys_dir)
        gpu_type = min(pool.gpu_type for pool in config.pools)
        copies = VerifiedCopies(settings.verified_dir, store, trusted)
        deployer = Deployer(registry, copies, config, paths.repository, worker_addresses(config), settings.rollout,
                            gpu_type, profiles=_profiles(paths, config))
        token = read_metrics_token(load_gateway_settings(paths.gateway_file), paths.config_dir)
        gateways: Sequence[str] | Callable[[], Sequence[str]] = list(gateway_urls)
        if settings.kubernetes is not None and settings.mode == "kubernetes":
            gateways = _remote_workers(deployer, config, settings.kubernetes, resolver or DnsResolver()) or gateways
        rollouts = RolloutManager(registry, deployer, gateways, settings.rollout, settings.canary,
                                  probe_headers={"Authorization": f"Bearer {token}"} if token else {})
        canary = CanaryAnalysis(rollouts, MetricsHistory(settings.canary.window_s))
        return cls(settings, config, paths, registry, store, deployer, rollouts, canary)

    def bootstrap(self, artifacts_dir: Path) -> None:
        """Register built artifacts where the registry has none; render every live version of each
        model a pool serves (the one render at start) and publish it (Kubernetes mode). A model
        with neither a registered version nor a built artifact (a cluster where versions are
        pushed with ``shunter models push``) is skipped until it has one."""
        self.paths.repository.mkdir(parents=True, exist_ok=True)
        for spec in self.config.models:
            pools = [p for p in self.config.pools if spec.name in p.models]
            if not pools:
                continue
            if not self.registry.versions(spec.name) and not (artifacts_dir / spec.name).is_dir():
                continue
            if not self.registry.versions(spec.name):
                push_directory(self.store, self.registry, artifacts_dir / spec.name, spec, spec.version,
                               runtime_requirements(self.config, spec.name), self.settings.local_signing_key,
                               ACTOR, "artifact built by setup")
            if self.registry.deployment(spec.name) is None:
                self.registry.set_deployment(spec.name, [p.name for p in pools], spec.instances,
                                             sum(p.workers for p in pools), ACTOR, "pools.yaml at first start")
            alias = self.registry.alias(spec.name)
            if alias is None:
                self.registry.set_alias(spec.name, {spec.version: 100.0}, "request", ACTOR, "alias.create",
                                        "first start")
                alias = self.registry.alias(spec.name)
            assert alias is not None
            if self.deployer.discover is not None:  # Kubernetes: pods may be running already
                self._serve_on_pods(spec.name, list(alias.weights))
                continue
            sources = {v: self.deployer.stage(spec.name, v) for v in alias.weights}
            self.deployer.render(spec.name, sources)
            self.deployer.served[spec.name] = frozenset(sources)

    def _serve_on_pods(self, model: str, versions: list[int]) -> None:
        """Publish the live versions and load them on the pods running now (a pod that starts
        later reads them from the repository). A failure is logged and leaves the model as the
        pods had it; the next start or rollout tries again."""
        try:
            self.deployer.serve(model, versions, reason="live at control start")
        except DeployError as exc:
            log.error("control start: %s could not be served: %s", model, exc)

    def mark_served_ready(self) -> None:
        """Once the workers have loaded the rendered repository: its versions are READY."""
        for model, versions in self.deployer.served.items():
            for version in sorted(versions):
                record = self.registry.version(model, version)
                if record is not None and record.state is not VersionState.READY:
                    self.registry.set_version_state(model, version, VersionState.READY, ACTOR,
                                                    "loaded by the workers at start")

    def start_analysis(self) -> None:
        self.canary.start(self.settings.canary.interval_s)

    def close(self) -> None:
        self.canary.stop()
        self.registry.close()


def _remote_workers(deployer: Deployer, config: StackConfig, settings: KubernetesSettings,
                    resolver: Resolver) -> Callable[[], list[str]] | None:
    """Point ``deployer`` at the pools' pods and the S3 repository; return how to find the
    gateways' pods (None when ``gateway_host`` is not set)."""
    repository = S3Repository(settings.repository_uri)
    repository.ensure_bucket()  # the first render goes there; an unreachable S3 fails the start here
    deployer.discover = lambda: pool_workers(config, resolver)
    deployer.publish = repository.publish
    host = settings.gateway_host
    if host is None:
        return None
    return lambda: service_urls(host, settings.gateway_port, resolver)


def _profiles(paths: StackPaths, config: StackConfig) -> dict[str, CapacityProfile]:
    """The pools' capacity profiles (``scheduling.yaml``; none without the file): what a version's
    runtime requirements are checked against at deploy."""
    if not paths.scheduling_file.is_file():
        return {}
    return load_scheduling(paths.scheduling_file, config).profiles


def verify_local(directory: Path, settings: ControlSettings, model: str, version: int) -> None:
    """Check an artifact directory against the trusted keys (raises IntegrityError)."""
    verify_directory(directory, load_trusted_keys(settings.trusted_keys_dir), model, version)
