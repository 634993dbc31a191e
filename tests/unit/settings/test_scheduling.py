from pathlib import Path

import pytest
import yaml

from control.stack import load_config
from scheduling.scheduler import Policy
from scheduling.tenants import Tier
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import ConfigError, StackConfig

SHIPPED = StackPaths()


def _write(tmp_path: Path, **changes: object) -> Path:
    data = yaml.safe_load(SHIPPED.scheduling_file.read_text())
    data.update(changes)
    path = tmp_path / "scheduling.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_file_gives_a_profile_to_every_pool_and_an_slo_to_every_tier() -> None:
    settings = load_scheduling(SHIPPED.scheduling_file, load_config(SHIPPED))
    assert set(settings.slo) == set(Tier)
    assert settings.scheduler.policy is Policy.FAIR
    assert settings.limits["chat"].share(Tier.BATCH) < settings.limits["chat"].share(Tier.PREMIUM)


def test_the_policy_flag_overrides_the_file(tmp_path: Path) -> None:
    settings = load_scheduling(_write(tmp_path), load_config(SHIPPED), Policy.FIFO)
    assert settings.scheduler.policy is Policy.FIFO


def test_a_pool_whose_profile_is_not_defined_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="profile 'cpu'"):
        load_scheduling(_write(tmp_path, capacity_profiles={}), load_config(SHIPPED))


def test_every_tier_needs_an_slo(tmp_path: Path) -> None:
    slo = yaml.safe_load(SHIPPED.scheduling_file.read_text())["slo"]
    del slo["batch"]
    with pytest.raises(ConfigError, match="batch"):
        load_scheduling(_write(tmp_path, slo=slo), load_config(SHIPPED))


def test_a_share_above_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tier_budget_share"):
        load_scheduling(_write(tmp_path, tier_budget_share={"batch": 1.5}), load_config(SHIPPED))


def test_the_shipped_file_expires_queued_requests_that_can_no_longer_meet_their_ttft() -> None:
    assert load_scheduling(SHIPPED.scheduling_file, load_config(SHIPPED)).scheduler.expire_at_ttft is True


def test_ttft_expiry_can_be_turned_off(tmp_path: Path) -> None:
    settings = load_scheduling(_write(tmp_path, expire_at_ttft=False), load_config(SHIPPED))
    assert settings.scheduler.expire_at_ttft is False


def test_ttft_expiry_must_be_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expire_at_ttft"):
        load_scheduling(_write(tmp_path, expire_at_ttft="sometimes"), load_config(SHIPPED))


def test_the_prefill_line_bound_applies_to_llm_models_only(tmp_path: Path) -> None:
    settings = load_scheduling(_write(tmp_path, max_prefill_line_s=0.5), load_config(SHIPPED))
    assert settings.limits["chat"].max_prefill_line_s == 0.5
    assert all(limits.max_prefill_line_s is None for name, limits in settings.limits.items()
               if limits.kind.value != "llm")


def test_the_minimum_prefill_line_reaches_llm_limits_and_is_never_negative(tmp_path: Path) -> None:
    settings = load_scheduling(_write(tmp_path, min_prefill_line_tokens=500), load_config(SHIPPED))
    assert settings.limits["chat"].min_prefill_line_tokens == 500
    with pytest.raises(ConfigError, match="min_prefill_line_tokens"):
        load_scheduling(_write(tmp_path, min_prefill_line_tokens=-1), load_config(SHIPPED))


def test_a_non_positive_prefill_line_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_prefill_line_s"):
        load_scheduling(_write(tmp_path, max_prefill_line_s=0), load_config(SHIPPED))


def _with_chat(**changes: object) -> StackConfig:
    stack = load_config(SHIPPED)
    models = [m.model_copy(update=changes) if m.name == "chat" else m for m in stack.models]
    return stack.model_copy(update={"models": models})


def test_only_an_llm_whose_cpu_engine_keeps_its_prefix_cache_is_predicted_to_reuse_prefixes() -> None:
    shipped = load_scheduling(SHIPPED.scheduling_file, load_config(SHIPPED)).limits
    assert shipped["chat"].prefix_reuse and not shipped["embed"].prefix_reuse
    chat = next(m for m in load_config(SHIPPED).models if m.name == "chat")
    off = _with_chat(parameters={**chat.parameters, "prefix_cache": "false"})
    assert not load_scheduling(SHIPPED.scheduling_file, off).limits["chat"].prefix_reuse


def test_an_llm_on_tensorrt_llm_is_predicted_to_reuse_prefixes_only_with_its_kv_cache_reuse_on() -> None:
    stack = load_config(SHIPPED)
    pools = [p.model_copy(update={"gpu_type": "a100-80gb", "profile": "cpu"}) if "chat" in p.models else p
             for p in stack.pools]
    on_gpu = stack.model_copy(update={"pools": pools})
    assert not load_scheduling(SHIPPED.scheduling_file, on_gpu).limits["chat"].prefix_reuse
    models = [m.model_copy(update={"parameters": {**m.parameters, "trtllm_enable_kv_cache_reuse": "true"}})
              if m.name == "chat" else m for m in stack.models]
    reusing = on_gpu.model_copy(update={"models": models})
    assert load_scheduling(SHIPPED.scheduling_file, reusing).limits["chat"].prefix_reuse


def test_a_bad_engine_parameter_is_a_configuration_error() -> None:
    chat = next(m for m in load_config(SHIPPED).models if m.name == "chat")
    with pytest.raises(ConfigError, match="kv_block_tokens"):
        load_scheduling(SHIPPED.scheduling_file, _with_chat(parameters={**chat.parameters, "kv_block_tokens": "x"}))
