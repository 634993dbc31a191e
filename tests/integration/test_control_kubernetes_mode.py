"""Control in Kubernetes mode against real Triton processes standing in for a pool's pods.

Each "pod" is a real ``tritonserver`` on its own loopback address (127.0.0.2, .3, .4), all on the
same ports, reading the model repository from a real S3 endpoint (moto_server) with
``--model-control-mode=explicit --load-model=*``, as the pool Deployment runs it. The pool's
headless Service name resolves to them through a hosts-style mapping (the resolver seam). Control
starts none of them: it publishes each render to S3 and drives load/unload through each pod's
model-control API. A canary loads the new version on every pod and warms it there, the traffic
split moves, a pod added mid-rollout starts on exactly what the repository says and is included
in the rollback, which unloads the version everywhere and removes it from S3. A restarted control
loads the live version on a running pod that lacks it. The capacity controller, as ``python -m
control`` opens it, reads a real gateway pod's demand, counts the pods and publishes the desired
replicas KEDA scales the pool by; the test plays KEDA and starts the pod it asks for.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import tritonclient.http as httpclient
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from control.capacity.cluster import open_cluster_capacity
from control.capacity.snapshot import ReplicaCounts
from control.control_plane import ControlPlane, ensure_signing_key, push_directory
from control.registry import VersionState
from control.remote_workers import HostsResolver
from control.requirements import runtime_requirements
from control.s3_repository import S3Repository
from control.service import create_control_app
from control.stack import Listen, start_gateway, stop_process, wait_http_ok
from control.triton_control import ready_versions
from control.triton_runtime import resolve_runtime
from settings.control import load_control_settings
from settings.paths import StackPaths
from settings.stack import TritonSettings, load_stack_config
from settings.workers import WorkerAddress
from tests.integration.conftest import KEYS, metric_sum
from tests.integration.ports import port
from tests.s3server import LocalS3Server

pytestmark = pytest.mark.integration

BASE_PORT = port(28700)
POOL_HOST = "triton-cpu.shunter.svc.cluster.local"
GATEWAY_HOST = "shunter-gateway-pods.shunter.svc.cluster.local"
GATEWAY_PORT = port(28760)
BUCKET = "shunter"
MODEL = "tabular"


@dataclass
class Cluster:
    plane: ControlPlane
    repository: S3Repository
    s3: LocalS3Server
    pods: dict[str, subprocess.Popen[bytes]]
    dns: dict[str, tuple[str, ...]]
    start_pod: Callable[[str], None]
    paths: StackPaths


def _write_config(root: Path, endpoint: str) -> StackPaths:
    shipped = StackPaths()
    config_dir, state_dir = root / "config", root / "state"
    config_dir.mkdir(parents=True)
    state_dir.mkdir()
    models = yaml.safe_load(shipped.models_file.read_text())
    tabular = next(m for m in models["models"] if m["name"] == MODEL)
    # Without Triton's own model_warmup, every inference a pod counts is one control sent.
    (config_dir / "models.yaml").write_text(yaml.safe_dump({"models": [{**tabular, "instances": 1,
                                                                         "warmup": False}]}))
    (config_dir / "pools.yaml").write_text(yaml.safe_dump({"pools": [
        {"name": "cpu", "gpu_type": "cpu", "region": "local", "host": POOL_HOST, "base_port": BASE_PORT,
         "models": [MODEL], "discovery": "dns"}]}))
    (config_dir / "scheduling.yaml").write_text(shipped.scheduling_file.read_text())
    (config_dir / "capacity.yaml").write_text(yaml.safe_dump({
        "controller": {"period_s": 1, "scale_down_window_s": 600},
        "models": {MODEL: {"pools": {"cpu": {"min_replicas": 2, "max_replicas": 3}}}}}))
    (config_dir / "control.yaml").write_text(yaml.safe_dump({
        "mode": "kubernetes",
        # The gateway pods' name resolves to none until the capacity test starts one.
        "kubernetes": {"repository_uri": f"s3://{BUCKET}/repository?endpoint={endpoint}",
                       "gateway_host": GATEWAY_HOST, "gateway_port": GATEWAY_PORT, "pod_start_timeout_s": 120},
        "artifact_store": f"s3://{BUCKET}/artifacts?endpoint={endpoint}",
        "rollout": {"ready_timeout_s": 120, "drain_timeout_s": 5},
    }))
    return StackPaths(config_dir=config_dir, state_dir=state_dir, repository=root / "rendered")


def _pod_command(binary: Path, backend_dir: Path | None, repository_uri: str, ip: str) -> list[str]:
    """The pool Deployment's tritonserver arguments, on ``ip``."""
    return [str(binary), f"--model-repository={repository_uri}", "--model-control-mode=explicit",
            "--load-model=*", f"--http-address={ip}", f"--http-port={BASE_PORT}",
            f"--grpc-address={ip}", f"--grpc-port={BASE_PORT + 1}",
            f"--metrics-address={ip}", f"--metrics-port={BASE_PORT + 2}",
            "--disable-auto-complete-config", "--exit-timeout-secs=5", "--log-verbose=0",
            f"--backend-config=python,shm-region-prefix-name=shunter_k8s_test_{ip.replace('.', '_')}_",
            *([f"--backend-directory={backend_dir}"] if backend_dir is not None else [])]


def _address(ip: str) -> WorkerAddress:
    return WorkerAddress("cpu", 0, "cpu", "local", ip, BASE_PORT, BASE_PORT + 1, BASE_PORT + 2, (MODEL,))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("k8s")
    mp = pytest.MonkeyPatch()
    pods: dict[str, subprocess.Popen[bytes]] = {}
    with LocalS3Server() as s3:
        for name, value in s3.credentials_env.items():
            mp.setenv(name, value)
        s3.client().create_bucket(Bucket=BUCKET)
        paths = _write_config(root, s3.endpoint_url)
        config = load_stack_config(paths.pools_file, paths.models_file)
        ensure_signing_key(load_control_settings(paths.control_file, paths.state_dir))  # the publisher's key
        dns: dict[str, tuple[str, ...]] = {POOL_HOST: ()}  # a Service lists ready pods only
        plane = ControlPlane.open(paths, config, resolver=HostsResolver(dns))
        runtime = resolve_runtime(TritonSettings(), paths.state_dir)
        env = {**runtime.env, **s3.credentials_env}
        assert plane.settings.kubernetes is not None
        repository = S3Repository(plane.settings.kubernetes.repository_uri)

        def start_pod(ip: str) -> None:
            log = root / f"pod-{ip}.log"
            with log.open("ab") as out:
                pods[ip] = subprocess.Popen(_pod_command(runtime.binary, runtime.backend_dir,
                                                         f"{repository.triton_uri}/cpu", ip),
                                            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            wait_http_ok(f"http://{ip}:{BASE_PORT}/v2/health/ready", 120, pods[ip], log)
            dns[POOL_HOST] = (*dns[POOL_HOST], ip)

        try:
            plane.bootstrap(artifacts_dir)  # control renders v1 to S3 before any pod starts
            for ip in ("127.0.0.2", "127.0.0.3"):
                start_pod(ip)
            yield Cluster(plane, repository, s3, pods, dns, start_pod, paths)
        finally:
            for process in pods.values():
                stop_process(process, timeout_s=20)
            plane.close()
            mp.undo()


def _version_keys(cluster: Cluster, version: int) -> set[str]:
    return {k for k in cluster.repository.keys(MODEL, "cpu") if f"/cpu/{MODEL}/{version}/" in k}


def test_pods_start_on_the_version_control_published(cluster: Cluster) -> None:
    assert cluster.repository.triton_uri.startswith("s3://http://127.0.0.1:")
    for ip in ("127.0.0.2", "127.0.0.3"):
        assert ready_versions(_address(ip), MODEL) == {1}
    assert _version_keys(cluster, 1) and not _version_keys(cluster, 2)


def test_a_canary_loads_and_warms_on_every_pod_then_rolls_back(cluster: Cluster, artifacts_dir: Path) -> None:
    plane = cluster.plane
    spec = plane.config.model(MODEL)
    assert spec is not None
    push_directory(plane.store, plane.registry, artifacts_dir / MODEL, spec, 2,
                   runtime_requirements(plane.config, MODEL), plane.settings.local_signing_key, "test", "v2")

    plane.rollouts.start_canary(MODEL, 2, 25.0, "request", "test", "canary on the pool")
    pods = [_address(ip) for ip in ("127.0.0.2", "127.0.0.3")]
    for pod in pods:
        assert ready_versions(pod, MODEL) == {1, 2}
        def served(version: int, pod: WorkerAddress = pod) -> float:
            return metric_sum(f"http://{pod.host}:{pod.metrics_port}/metrics", "nv_inference_request_success_total",
                              {"model": MODEL, "version": str(version)})
        assert (served(1), served(2)) == (0, 1), f"{pod.host}: one warm request to the new version only"
    alias = plane.registry.alias(MODEL)
    assert alias is not None and alias.weights == {1: 75.0, 2: 25.0}
    assert _version_keys(cluster, 2), "version 2 is in the S3 repository"

    # KEDA scales the pool up mid-rollout: the new pod reads the repository as rendered now.
    cluster.start_pod("127.0.0.4")
    assert cluster.dns[POOL_HOST] == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert ready_versions(_address("127.0.0.4"), MODEL) == {1, 2}

    plane.rollouts.rollback(MODEL, "test", "bad canary")
    for ip in cluster.dns[POOL_HOST]:
        assert ready_versions(_address(ip), MODEL) == {1}, ip
    alias = plane.registry.alias(MODEL)
    assert alias is not None and alias.weights == {1: 100.0}
    record = plane.registry.version(MODEL, 2)
    assert record is not None and record.state is VersionState.RETIRED
    assert not _version_keys(cluster, 2), "version 2's files left the S3 repository"


def test_a_restarted_control_loads_the_live_version_on_running_pods(cluster: Cluster, artifacts_dir: Path) -> None:
    """A pod that runs without the model (it started before the model was pushed) gets it when
    control starts again, which is what an operator's first push is followed by."""
    empty = _address("127.0.0.4")
    client = httpclient.InferenceServerClient(f"{empty.host}:{empty.http_port}")
    try:
        client.unload_model(MODEL)
    finally:
        client.close()
    assert ready_versions(empty, MODEL) == set()
    restarted = ControlPlane.open(cluster.paths, cluster.plane.config, resolver=HostsResolver(cluster.dns))
    try:
        restarted.bootstrap(artifacts_dir)
    finally:
        restarted.close()
    for ip in cluster.dns[POOL_HOST]:
        assert ready_versions(_address(ip), MODEL) == {1}, ip


def _gateway_pod(root: Path, cluster: Cluster) -> StackPaths:
    """A gateway pod's configuration: the shipped one, serving the pool through its first pod (a
    real gateway cannot resolve the stand-in pool name, so its pool lists that pod's address)."""
    shipped = StackPaths()
    config_dir, state_dir = root / "config", root / "state"
    config_dir.mkdir(parents=True)
    state_dir.mkdir()
    for name in ("tenants.yaml", "scheduling.yaml", "gateway.yaml"):
        (config_dir / name).write_text((shipped.config_dir / name).read_text())
    (config_dir / "models.yaml").write_text(cluster.paths.models_file.read_text())
    (config_dir / "pools.yaml").write_text(yaml.safe_dump({"pools": [
        {"name": "cpu", "gpu_type": "cpu", "region": "local", "host": "127.0.0.2", "base_port": BASE_PORT,
         "models": [MODEL]}]}))
    return StackPaths(config_dir=config_dir, state_dir=state_dir)


def _desired_replicas(metrics_text: str, pool: str) -> float:
    """What each pool's ScaledObject asks Prometheus: ``max(shunter_capacity_desired_replicas{pool=...})``."""
    return max(sample.value for family in text_string_to_metric_families(metrics_text)
               for sample in family.samples
               if sample.name == "shunter_capacity_desired_replicas" and sample.labels["pool"] == pool)


def test_the_capacity_controller_sizes_the_pool_through_keda_s_metric(cluster: Cluster, tmp_path: Path) -> None:
    stop_process(cluster.pods.pop("127.0.0.4"), timeout_s=20)  # KEDA scaled the pool back to two pods
    cluster.dns[POOL_HOST] = ("127.0.0.2", "127.0.0.3")
    gateway = start_gateway(_gateway_pod(tmp_path, cluster), Listen(gateway_port=GATEWAY_PORT), tmp_path / "gw.log")
    cluster.dns[GATEWAY_HOST] = ("127.0.0.1",)
    try:
        pods, controller = open_cluster_capacity(cluster.plane, HostsResolver(cluster.dns))
        assert controller is not None
        app = TestClient(create_control_app(cluster.plane.config, None, "admin", cluster.plane, replicas=pods,
                                            capacity=controller))
        body = {"inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 64], "data": [0.0] * 128}]}
        with httpx.Client(base_url=f"http://127.0.0.1:{GATEWAY_PORT}", timeout=60,
                          headers={"Authorization": f"Bearer {KEYS['premium']}"}) as client:
            for _ in range(3):
                assert client.post(f"/v2/models/{MODEL}/infer", json=body).status_code == 200

        (decision,) = controller.run_once()  # the demand read from the gateway pod, the pods counted
        assert (decision.key.pool, decision.current, decision.desired) == ("cpu", 2, 2), decision
        assert controller.gateway_error is None and controller.snapshot is not None
        assert _desired_replicas(app.get("/metrics").text, "cpu") == 2

        controller.override(MODEL, "cpu", 3, 120, "operator", "KEDA drill")
        controller.run_once()
        assert _desired_replicas(app.get("/metrics").text, "cpu") == 3, "KEDA's query now asks for a third pod"
        assert pods.counts("cpu", MODEL) == ReplicaCounts(2, 1, 0), "asked for, not ready: starting"

        cluster.start_pod("127.0.0.4")  # KEDA: the Deployment's third pod, ready once the repository loaded
        time.sleep(1.1)  # past the pod survey's reuse
        controller.run_once()
        row = next(r for r in app.get("/admin/v1/capacity", headers={"Authorization": "Bearer admin"}).json()["rows"])
        assert (row["ready"], row["starting"], row["desired"]) == (3, 0, 3), row
        assert row["last_cold_start_s"] is not None and row["last_cold_start_s"] > 0
        assert app.get("/admin/capacity/replicas", headers={"Authorization": "Bearer admin"}).json()[
            "cold_start_s"][MODEL] == row["last_cold_start_s"]
        actions = [e.action for e in cluster.plane.registry.audit_log(MODEL, "capacity.")]
        assert "capacity.override" in actions and "capacity.decision" in actions
    finally:
        cluster.dns.pop(GATEWAY_HOST, None)
        stop_process(gateway)
