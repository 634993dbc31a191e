"""What must hold in every rendered overlay: GPU pools land on their GPUs, every container is bounded
and unprivileged, images are pinned, every ScaledObject scales an existing Deployment on the
capacity controller's metric, references resolve, only the gateway (and control) reach Triton, and
the generated files are what ``shunter k8s render`` writes from ``fleet.yaml``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.kubernetes import (
    DEPLOY_DIR,
    DESIRED_REPLICAS_METRIC,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    FleetSpec,
    PoolEntry,
    pool_bounds,
    rendered_files,
)
from settings.base import ConfigError
from settings.capacity import load_capacity
from settings.control import load_control_settings
from settings.scheduling import load_scheduling
from settings.stack import StackConfig, load_stack_config
from tests.unit.deploy.conftest import OVERLAYS, Rendered

# Secrets the gpu-fleet operator creates (docs/deploy-kubernetes.md); cpu-dev generates its own.
EXTERNAL_SECRETS = {"shunter-admin", "shunter-s3", "shunter-postgres", "shunter-tenants", "shunter-trusted-keys"}
IMAGE = re.compile(r"^[a-z0-9.-]+(?::\d+)?(?:/[a-z0-9._-]+)*(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@sha256:[0-9a-f]{64})?$")


def _tritons(rendered: Rendered) -> list[dict[str, Any]]:
    return [o for o in rendered.of_kind("Deployment")
            if o["metadata"]["labels"].get("app.kubernetes.io/name") == "triton"]


def _containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [*template["spec"].get("initContainers", []), *template["spec"]["containers"]]


def _stack(rendered: Rendered, tmp_path: Path) -> StackConfig:
    for name in ("pools.yaml", "models.yaml"):
        (tmp_path / name).write_text(_raw(rendered, name))
    return load_stack_config(tmp_path / "pools.yaml", tmp_path / "models.yaml")


def _raw(rendered: Rendered, name: str) -> str:
    config_map = next(o for o in rendered.of_kind("ConfigMap") if o["metadata"]["name"].startswith("shunter-config"))
    text: str = config_map["data"][name]
    return text


def _references(node: Any, found: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """The ConfigMaps and Secrets a pod template names (volumes, projections, env, envFrom)."""
    found = found if found is not None else {"configMap": set(), "secret": set()}
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("configMap", "configMapRef", "configMapKeyRef") and isinstance(value, dict):
                found["configMap"].add(value["name"])
            elif key in ("secretRef", "secretKeyRef") or (key == "secret" and "name" in value):
                found["secret"].add(value["name"])
            elif key == "secret":
                found["secret"].add(value["secretName"])
            _references(value, found)
    elif isinstance(node, list):
        for item in node:
            _references(item, found)
    return found


def test_every_pool_has_its_deployment_service_and_scaler(rendered: Rendered) -> None:
    names = {o["metadata"]["name"] for o in _tritons(rendered)}
    assert names == {f"triton-{p.name}" for p in rendered.fleet.pools}
    for pool in rendered.fleet.pools:
        service = rendered.named("Service", f"triton-{pool.name}")
        assert service is not None and service["spec"]["clusterIP"] == "None", "a headless Service per pool"
        assert rendered.named("ScaledObject", f"triton-{pool.name}") is not None


def test_gpu_pools_select_their_gpu_product_tolerate_the_taint_and_claim_gpus(rendered: Rendered) -> None:
    pools = {f"triton-{p.name}": p for p in rendered.fleet.pools}
    for deployment in _tritons(rendered):
        pool = pools[deployment["metadata"]["name"]]
        spec = deployment["spec"]["template"]["spec"]
        limits = spec["containers"][0]["resources"]["limits"]
        if pool.gpu_product is None:
            assert GPU_RESOURCE not in limits and GPU_PRODUCT_LABEL not in spec.get("nodeSelector", {})
            continue
        assert spec["nodeSelector"][GPU_PRODUCT_LABEL] == pool.gpu_product
        assert {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert limits[GPU_RESOURCE] == pool.gpus >= 1


def test_the_gpu_fleet_has_a10_a100_and_h100_pools() -> None:
    from cli.kubernetes import load_fleet

    fleet = load_fleet(DEPLOY_DIR / "overlays" / "gpu-fleet" / "fleet.yaml")
    assert {p.gpu_product for p in fleet.pools} == {"NVIDIA-A10", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}


def test_triton_reads_s3_with_explicit_model_control_and_is_probed(rendered: Rendered) -> None:
    for deployment in _tritons(rendered):
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        assert "--model-control-mode=explicit" in args
        pool = deployment["metadata"]["name"].removeprefix("triton-")
        assert any(a.startswith("--model-repository=s3://") and a.endswith(f"/{pool}") for a in args), \
            "each pool reads the repository control renders for its GPU type"
        assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        startup = container["startupProbe"]
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "room to load weights"


def test_every_container_is_bounded_and_unprivileged(rendered: Rendered) -> None:
    for workload, template in rendered.pod_templates():
        pod_context = template["spec"].get("securityContext", {})
        for container in _containers(template):
            where = f"{workload['metadata']['name']}/{container['name']}"
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound}"
            context = container.get("securityContext", {})
            assert context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True, where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("capabilities", {}).get("drop") == ["ALL"], where
            assert context.get("runAsUser", pod_context.get("runAsUser", 1)) != 0, where


def test_every_image_is_pinned(rendered: Rendered) -> None:
    for workload, template in rendered.pod_templates():
        for container in _containers(template):
            image = container["image"]
            match = IMAGE.match(image)
            assert match is not None and ("@sha256:" in image or match["tag"]), f"{image}: no tag or digest"
            assert match["tag"] != "latest", f"{workload['metadata']['name']}: {image}"


def test_every_scaled_object_scales_a_deployment_on_the_desired_replicas_metric(
        rendered: Rendered, tmp_path: Path) -> None:
    stack = _stack(rendered, tmp_path)
    pools = {p.name: p for p in stack.pools}
    for name in ("scheduling.yaml", "capacity.yaml"):
        (tmp_path / name).write_text(_raw(rendered, name))
    targets = load_capacity(tmp_path / "capacity.yaml", stack, load_scheduling(tmp_path / "scheduling.yaml", stack)
                            ).policy.targets
    for scaled in rendered.of_kind("ScaledObject"):
        target = scaled["spec"]["scaleTargetRef"]
        assert target["kind"] == "Deployment" and rendered.named("Deployment", target["name"]) is not None
        (trigger,) = scaled["spec"]["triggers"]
        assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
        query = trigger["metadata"]["query"]
        found = re.fullmatch(rf'max\({DESIRED_REPLICAS_METRIC}\{{pool="([a-z0-9-]+)"\}}\)', query)
        assert found is not None, query
        pool = found[1]
        assert pool in pools and target["name"] == f"triton-{pool}"
        on_pool = [t for key, t in targets.items() if key.pool == pool]
        assert {t.key.model for t in on_pool} == set(pools[pool].models), "capacity.yaml bounds every model"
        assert scaled["spec"]["minReplicaCount"] == max(t.min_replicas for t in on_pool), "zero only if all may"
        assert scaled["spec"]["maxReplicaCount"] == max(t.max_replicas for t in on_pool)
        assert scaled["spec"]["fallback"]["replicas"] >= 1, "Prometheus down never means zero pods"


def test_referenced_config_maps_secrets_and_services_exist(rendered: Rendered) -> None:
    config_maps = {o["metadata"]["name"] for o in rendered.of_kind("ConfigMap")}
    secrets = {o["metadata"]["name"] for o in rendered.of_kind("Secret")}
    allowed_secrets = secrets | (EXTERNAL_SECRETS if rendered.overlay == "gpu-fleet" else set())
    for workload, template in rendered.pod_templates():
        where = workload["metadata"]["name"]
        found = _references(template)
        assert found["configMap"] <= config_maps, f"{where}: {found['configMap'] - config_maps}"
        assert found["secret"] <= allowed_secrets, f"{where}: {found['secret'] - allowed_secrets}"
    labels = [t["metadata"]["labels"] for _, t in rendered.pod_templates()]
    for service in rendered.of_kind("Service"):
        selector = service["spec"]["selector"]
        assert any(selector.items() <= pod.items() for pod in labels), f"Service {service['metadata']['name']}"
    for monitor in rendered.of_kind("ServiceMonitor"):
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in rendered.of_kind("Service") if wanted.items() <= s["metadata"]["labels"].items()]
        port = monitor["spec"]["endpoints"][0]["port"]
        assert matched and all(port in {p["name"] for p in s["spec"]["ports"]} for s in matched), monitor


def test_only_gateway_control_and_monitoring_reach_triton(rendered: Rendered) -> None:
    (policy,) = [p for p in rendered.of_kind("NetworkPolicy")
                 if p["spec"]["podSelector"].get("matchLabels") == {"app.kubernetes.io/name": "triton"}]
    peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
    assert peers and all(
        peer.get("podSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/name") in ("shunter-gateway",
                                                                                            "shunter-control")
        or peer.get("namespaceSelector", {}).get("matchLabels") == {"kubernetes.io/metadata.name": "monitoring"}
        for peer in peers)
    assert rendered.named("NetworkPolicy", "default-deny-ingress") is not None
    admin = rendered.named("NetworkPolicy", "control-from-gateway-and-operators")
    assert admin is not None
    assert all("ipBlock" not in peer for rule in admin["spec"]["ingress"] for peer in rule["from"])


def test_the_gateway_is_replicated_disruption_budgeted_and_autoscaled(rendered: Rendered) -> None:
    gateway = rendered.named("Deployment", "shunter-gateway")
    hpa = rendered.named("HorizontalPodAutoscaler", "shunter-gateway")
    pdb = rendered.named("PodDisruptionBudget", "shunter-gateway")
    assert gateway is not None and hpa is not None and pdb is not None
    assert gateway["spec"]["replicas"] >= 2 and hpa["spec"]["minReplicas"] >= 2
    assert hpa["spec"]["scaleTargetRef"]["name"] == "shunter-gateway"
    container = gateway["spec"]["template"]["spec"]["containers"][0]
    assert (container["readinessProbe"]["httpGet"]["path"], container["livenessProbe"]["httpGet"]["path"]) == \
        ("/readyz", "/healthz")
    assert rendered.named("Deployment", "shunter-control")["spec"]["replicas"] == 1  # type: ignore[index]


def test_the_rendered_configuration_loads(rendered: Rendered, tmp_path: Path) -> None:
    stack = _stack(rendered, tmp_path)
    (tmp_path / "scheduling.yaml").write_text(_raw(rendered, "scheduling.yaml"))
    load_scheduling(tmp_path / "scheduling.yaml", stack)  # every pool's capacity profile exists
    (tmp_path / "control.yaml").write_text(_raw(rendered, "control.yaml"))
    control = load_control_settings(tmp_path / "control.yaml", tmp_path)
    assert control.mode == "kubernetes" and control.kubernetes is not None
    assert control.kubernetes.repository_uri == rendered.fleet.repository_uri
    user = control.registry_url.removeprefix("postgresql+psycopg://").split("@")[0]
    assert control.registry_url.startswith("postgresql+psycopg://") and ":" not in user, "no password in a ConfigMap"
    assert rendered.config_file("gateway.yaml")["state_store"].startswith("redis://")
    for pool in stack.pools:
        assert pool.host == f"triton-{pool.name}.{rendered.fleet.namespace}.svc.cluster.local"
        assert pool.discovery == "dns", "the gateway finds each pod of the pool"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_generated_files_are_what_the_fleet_renders(overlay: str) -> None:
    for path, text in rendered_files(DEPLOY_DIR / "overlays" / overlay).items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run `shunter k8s render`"


def test_fleet_entries_are_checked() -> None:
    base = {"name": "a10", "gpu_type": "a10", "gpu_product": "NVIDIA-A10", "cpu": "4", "memory": "8Gi",
            "models": ["embed"]}
    with pytest.raises(ValueError, match="gpu_product"):
        PoolEntry.model_validate({**base, "gpus": 0})
    with pytest.raises(ValueError, match="worker_image"):
        FleetSpec.model_validate({"namespace": "x", "worker_image": "triton", "repository_uri": "s3://b",
                                  "prometheus_url": "http://p", "pools": [base]})


def test_a_bad_fleet_file_names_the_field(tmp_path: Path) -> None:
    from cli.kubernetes import load_fleet

    (tmp_path / "fleet.yaml").write_text("namespace: x\npools: []\n")
    with pytest.raises(ConfigError, match="worker_image"):
        load_fleet(tmp_path / "fleet.yaml")


def test_pool_bounds_are_the_widest_of_their_models_and_every_model_is_bounded(tmp_path: Path) -> None:
    fleet = FleetSpec.model_validate({
        "namespace": "x", "worker_image": "triton:1", "repository_uri": "s3://b", "prometheus_url": "http://p",
        "pools": [{"name": "a10", "gpu_type": "a10", "gpu_product": "NVIDIA-A10", "cpu": "4", "memory": "8Gi",
                   "models": ["embed", "vision"]},
                  {"name": "h100", "gpu_type": "h100", "gpu_product": "NVIDIA-H100", "cpu": "4", "memory": "8Gi",
                   "models": ["chat"]}]})
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(yaml.safe_dump({"models": {
        "embed": {"pools": {"a10": {"min_replicas": 1, "max_replicas": 3}}},
        "vision": {"scale_to_zero": {"enabled": True}, "pools": {"a10": {"min_replicas": 0, "max_replicas": 5}}},
        "chat": {"pools": {"h100": {"min_replicas": 0, "max_replicas": 2}}}}}))
    bounds = pool_bounds(fleet, capacity)
    assert (bounds["a10"].min_replicas, bounds["a10"].max_replicas) == (1, 5), "embed keeps the pool warm"
    assert (bounds["h100"].min_replicas, bounds["h100"].max_replicas) == (0, 2)
    capacity.write_text(yaml.safe_dump({"models": {
        "embed": {"pools": {"a10": {"min_replicas": 1, "max_replicas": 3}}},
        "chat": {"pools": {"h100": {"min_replicas": 0, "max_replicas": 2}}}}}))
    with pytest.raises(ConfigError, match=r"models\.vision\.pools\.a10: missing"):
        pool_bounds(fleet, capacity)
