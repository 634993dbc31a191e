"""The capacity controller in Kubernetes mode (``python -m control``): the same controller and
policy as the local stack, over the pools' pods instead of processes control starts.

``open_cluster_capacity`` builds ``pods.PodReplicas`` over the pods the plane's deployer finds
(each pool's headless Service) and, when ``capacity.yaml`` controls some (pool, model) and
``replicas.enabled`` is on, a ``CapacityController`` that reads the demand from every gateway pod
behind ``kubernetes.gateway_host`` and publishes ``shunter_capacity_desired_replicas`` on
control's ``/metrics``, which each pool's KEDA ScaledObject follows. Without ``gateway_host``
the controller cannot read any demand, so that is a configuration error when it would run.
"""

from __future__ import annotations

from control.capacity.controller import CapacityController
from control.capacity.pods import PodReplicas
from control.control_plane import ControlPlane
from control.remote_workers import Resolver, service_urls
from settings.base import ConfigError
from settings.capacity import load_capacity
from settings.scheduling import load_scheduling


def open_cluster_capacity(plane: ControlPlane, resolver: Resolver) -> tuple[PodReplicas, CapacityController | None]:
    """The pods of every pool and the controller that sizes them (None when nothing is
    controlled); the controller is not started. ``resolver`` finds the gateway pods, as the
    plane's finds the pools' pods."""
    kubernetes, discover = plane.settings.kubernetes, plane.deployer.discover
    if kubernetes is None or discover is None:
        raise ConfigError(f"{plane.paths.control_file}: the capacity controller on pods needs mode: kubernetes")
    config, settings = plane.config, plane.settings.replicas
    capacity = load_capacity(plane.paths.capacity_file, config, load_scheduling(plane.paths.scheduling_file, config))
    pods = PodReplicas(config, discover, settings, kubernetes.pod_start_timeout_s)
    if not settings.enabled or not capacity.policy.targets:
        return pods, None
    host = kubernetes.gateway_host
    if host is None:
        raise ConfigError(f"{plane.paths.control_file}: kubernetes.gateway_host is needed: the capacity controller "
                          "reads the demand from the gateway pods (or set replicas.enabled: false)")
    port = kubernetes.gateway_port
    controller = CapacityController(capacity, config, pods, lambda: service_urls(host, port, resolver),
                                    plane.registry, settings)
    return pods, controller
