"""Finding a pool's pods by name: the hosts-style resolver, the system resolver, worker addresses."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.remote_workers import DnsResolver, HostsResolver, pool_workers, service_urls
from settings.base import ConfigError
from settings.control import load_control_settings
from settings.stack import PoolSpec, StackConfig
from settings.workers import current_workers, worker_addresses

HOSTS = """
# pods of the a100 pool
10.0.0.12  triton-a100.shunter.svc.cluster.local
10.0.0.3   triton-a100.shunter.svc.cluster.local  triton-a100
10.0.1.7   triton-h100.shunter.svc.cluster.local
"""


def _config(*pools: PoolSpec) -> StackConfig:
    return StackConfig.model_construct(pools=pools, models=())


def test_a_name_resolves_to_every_address_listed_for_it_in_address_order() -> None:
    resolver = HostsResolver.from_text(HOSTS)
    assert resolver.resolve("triton-a100.shunter.svc.cluster.local") == ["10.0.0.3", "10.0.0.12"]
    assert resolver.resolve("triton-a100") == ["10.0.0.3"]
    assert resolver.resolve("triton-a10") == []


def test_unknown_names_fall_through_to_the_fallback() -> None:
    resolver = HostsResolver.from_text("127.0.0.2 pods", fallback=HostsResolver.from_text("127.0.0.9 other"))
    assert resolver.resolve("other") == ["127.0.0.9"]


@pytest.mark.parametrize("line", ["10.0.0.1", "not-an-ip name"])
def test_a_bad_hosts_line_is_refused(line: str) -> None:
    with pytest.raises(ValueError):
        HostsResolver.from_text(line)


def test_the_system_resolver_finds_the_loopback_and_nothing_for_an_invalid_name() -> None:
    assert "127.0.0.1" in DnsResolver().resolve("localhost")
    assert DnsResolver().resolve("no-such-host.invalid") == []


def test_each_pod_of_a_pool_is_a_worker_on_the_pools_ports() -> None:
    a100 = PoolSpec(name="a100", gpu_type="a100", region="eu-west", host="triton-a100.shunter.svc.cluster.local",
                    base_port=8000, models=("chat",))
    h100 = PoolSpec(name="h100", gpu_type="h100", host="triton-h100.shunter.svc.cluster.local", base_port=8000,
                    models=("chat", "embed"))
    workers = pool_workers(_config(a100, h100), HostsResolver.from_text(HOSTS))
    assert [(w.name, w.host, w.http_port, w.grpc_port, w.metrics_port) for w in workers] == [
        ("a100-10.0.0.3", "10.0.0.3", 8000, 8001, 8002),
        ("a100-10.0.0.12", "10.0.0.12", 8000, 8001, 8002),
        ("h100-10.0.1.7", "10.0.1.7", 8000, 8001, 8002),
    ]
    assert workers[2].models == ("chat", "embed") and workers[0].region == "eu-west"


def test_dns_pools_are_resolved_and_static_pools_kept_as_configured() -> None:
    static = PoolSpec(name="local", workers=2, base_port=9000, models=("embed",))
    pods = PoolSpec(name="a100", gpu_type="a100", host="triton-a100", base_port=8010, discovery="dns",
                    models=("chat",))
    resolver = HostsResolver.from_text(HOSTS)
    assert [w.name for w in current_workers(_config(static, pods), resolver)] == [
        "local-0", "local-1", "a100-10.0.0.3"]
    assert [w.name for w in worker_addresses(_config(static, pods))] == ["local-0", "local-1"]


def test_a_pool_scaled_to_zero_has_no_workers() -> None:
    pool = PoolSpec(name="a10", gpu_type="a10", host="triton-a10", models=("embed",))
    assert pool_workers(_config(pool), HostsResolver.from_text(HOSTS)) == []


def test_gateway_urls_are_one_per_pod() -> None:
    resolver = HostsResolver.from_text("10.0.2.1 gw\n10.0.2.2 gw\n::1 gw6")
    assert service_urls("gw", 8080, resolver) == ["http://10.0.2.1:8080", "http://10.0.2.2:8080"]
    assert service_urls("gw6", 8080, resolver) == ["http://[::1]:8080"]


def test_kubernetes_mode_needs_its_repository(tmp_path: Path) -> None:
    path = tmp_path / "control.yaml"
    path.write_text("mode: kubernetes\n")
    with pytest.raises(ConfigError, match="kubernetes"):
        load_control_settings(path, tmp_path)
    path.write_text("mode: kubernetes\nkubernetes:\n  repository_uri: http://not-s3\n")
    with pytest.raises(ConfigError, match="repository_uri"):
        load_control_settings(path, tmp_path)
    path.write_text("mode: kubernetes\nkubernetes:\n  repository_uri: s3://models/repo?endpoint=http://s3:9000\n")
    settings = load_control_settings(path, tmp_path)
    assert settings.kubernetes is not None and settings.kubernetes.gateway_port == 8080
    assert load_control_settings(tmp_path / "absent.yaml", tmp_path).mode == "local"
