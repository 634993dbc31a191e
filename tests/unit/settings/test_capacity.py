"""capacity.yaml: the shipped file loads; bad files fail with an error naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.autoscaling import PoolModel
from scheduling.tenants import Tier
from settings.base import ConfigError
from settings.capacity import load_capacity
from settings.paths import StackPaths
from settings.scheduling import SchedulingSettings, load_scheduling
from settings.stack import StackConfig, load_stack_config
from settings.tenants import load_tenants


@pytest.fixture(scope="module")
def shipped() -> tuple[StackConfig, SchedulingSettings]:
    paths = StackPaths()
    stack = load_stack_config(paths.pools_file, paths.models_file)
    return stack, load_scheduling(paths.scheduling_file, stack)


def _load(tmp_path: Path, text: str, shipped: tuple[StackConfig, SchedulingSettings],
          tenants: list[str] | None = None) -> object:
    path = tmp_path / "capacity.yaml"
    path.write_text(text)
    return load_capacity(path, *shipped, tenants=tenants)


def test_shipped_capacity_file_loads_with_objectives_from_the_tier_slo(
        shipped: tuple[StackConfig, SchedulingSettings]) -> None:
    paths = StackPaths()
    names = [t.name for t in load_tenants(paths.tenants_file).tenants]
    settings = load_capacity(paths.capacity_file, *shipped, tenants=names)
    chat = settings.policy.models["chat"]
    premium = shipped[1].slo[Tier.PREMIUM]
    assert chat.ttft_p95_s == premium.ttft_s and chat.queue_wait_p95_s == premium.ttft_s / 2
    embed = settings.policy.targets[PoolModel("local-cpu", "embed")]
    assert (embed.min_replicas, embed.max_replicas) == (1, 2)
    assert embed.profile.cost_per_hour == shipped[1].profile_of("cpu").cost_per_hour
    assert settings.slots["local-cpu"] == 2
    assert settings.policy.scale_down_window_s == 300


def test_missing_file_controls_nothing(tmp_path: Path, shipped: tuple[StackConfig, SchedulingSettings]) -> None:
    settings = load_capacity(tmp_path / "absent.yaml", *shipped)
    assert not settings.policy.targets and settings.slots["local-cpu"] == 1


@pytest.mark.parametrize(("text", "field"), [
    ("models: {chat: {pools: {local-cpu: {min_replicas: 3, max_replicas: 2}}}}", "min_replicas 3 > max_replicas 2"),
    ("controller: {scale_down_window_s: -1}", "controller.scale_down_window_s"),
    ("controller: {burn_rate: {short_window_s: -5}}", "controller.burn_rate.short_window_s"),
    ("controller: {burn_rate: {short_window_s: 600, long_window_s: 300}}", "short_window_s must be < long"),
    ("models: {nope: {pools: {local-cpu: {}}}}", "models.nope: unknown model"),
    ("models: {chat: {pools: {gpu-pool: {}}}}", "models.chat.pools.gpu-pool: unknown pool"),
    ("models: {vision: {scale_to_zero: {enabled: true}, pools: {local-cpu: {min_replicas: 1}}}}",
     "pools.local-cpu.min_replicas is 1"),
    ("models: {chat: {scale_to_zero: {idle_s: -3}, pools: {local-cpu: {}}}}", "scale_to_zero.idle_s"),
    ("models: {chat: {pools: {local-cpu: {min_replicas: 2, max_replicas: 2}}}}",
     "min_replicas 2 > pools.yaml local-cpu.workers 1"),
    ("models: {chat: {pools: {}}}", "models.chat.pools"),
    ("models: {chat: {pools: {local-cpu: {}}, speed: 3}}", "models.chat.speed"),
    ("tenants: {ghost: {max_cost_per_hour: 1}}", "tenants.ghost: unknown tenant"),
    ("tenants: {demo-premium: {}}", "set max_cost_per_hour or max_replicas"),
])
def test_bad_capacity_file_names_the_field(tmp_path: Path, shipped: tuple[StackConfig, SchedulingSettings],
                                           text: str, field: str) -> None:
    with pytest.raises(ConfigError, match=r"capacity\.yaml") as info:
        _load(tmp_path, text, shipped, tenants=["demo-premium"])
    assert field in str(info.value).replace("\n  ", ".").replace("\n", " ")


def test_max_replicas_reserving_another_pools_ports_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pools.yaml").write_text(
        "pools:\n  - {name: a, base_port: 9000, models: [tabular]}\n"
        "  - {name: b, base_port: 9003, models: [tabular]}\n")
    (tmp_path / "models.yaml").write_text("models:\n  - {name: tabular, kind: tabular}\n")
    stack = load_stack_config(tmp_path / "pools.yaml", tmp_path / "models.yaml")
    scheduling = load_scheduling(StackPaths().scheduling_file, stack)
    (tmp_path / "capacity.yaml").write_text("models: {tabular: {pools: {a: {max_replicas: 2}}}}\n")
    with pytest.raises(ConfigError, match=r"pool b: worker 0 .* port 9003, already reserved by pool a"):
        load_capacity(tmp_path / "capacity.yaml", stack, scheduling)
