from pathlib import Path

import pytest

from settings.paths import StackPaths
from settings.stack import ConfigError, StackConfig, WorkloadKind, load_stack_config


def test_shipped_configuration_serves_the_five_workloads() -> None:
    paths = StackPaths()
    config = load_stack_config(paths.pools_file, paths.models_file)
    kinds = {m.name: m.kind for m in config.models}
    assert kinds == {"chat": WorkloadKind.LLM, "embed": WorkloadKind.EMBEDDING, "rerank": WorkloadKind.RERANK,
                     "vision": WorkloadKind.VISION, "tabular": WorkloadKind.TABULAR}
    assert set(config.pools[0].models) == set(kinds)


def _write(tmp_path: Path, pools: str, models: str) -> tuple[Path, Path]:
    (tmp_path / "pools.yaml").write_text(pools)
    (tmp_path / "models.yaml").write_text(models)
    return tmp_path / "pools.yaml", tmp_path / "models.yaml"


MODELS = "models:\n  - {name: tabular, kind: tabular, batching: {max_batch_size: 8}}\n"


def test_pool_serving_an_unknown_model_is_rejected_naming_both_files(tmp_path: Path) -> None:
    pools, models = _write(tmp_path, "pools:\n  - {name: p, models: [nope]}\n", MODELS)
    with pytest.raises(ConfigError, match="unknown models"):
        load_stack_config(pools, models)


def test_overlapping_worker_ports_are_rejected(tmp_path: Path) -> None:
    pools, models = _write(
        tmp_path,
        "pools:\n  - {name: a, workers: 2, base_port: 9000, models: [tabular]}\n"
        "  - {name: b, base_port: 9003, models: [tabular]}\n",
        MODELS,
    )
    with pytest.raises(ConfigError, match="port 9003 used twice"):
        load_stack_config(pools, models)


def test_llm_without_context_length_is_rejected(tmp_path: Path) -> None:
    pools, models = _write(tmp_path, "pools:\n  - {name: p, models: [x]}\n", "models:\n  - {name: x, kind: llm}\n")
    with pytest.raises(ConfigError, match="context_tokens"):
        load_stack_config(pools, models)


def test_unknown_keys_and_bad_yaml_are_errors_not_ignored(tmp_path: Path) -> None:
    pools, models = _write(tmp_path, "pools:\n  - {name: p, models: [tabular], wrokers: 2}\n", MODELS)
    with pytest.raises(ConfigError, match="wrokers"):
        load_stack_config(pools, models)
    pools.write_text("pools: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_stack_config(pools, models)


def test_worker_ports_follow_the_base_port() -> None:
    config = StackConfig.model_validate({
        "triton": {}, "models": [{"name": "t", "kind": "tabular"}],
        "pools": [{"name": "p", "workers": 2, "base_port": 9100, "models": ["t"]}],
    })
    assert config.pools[0].worker_ports(1) == (9103, 9104, 9105)
