"""An LLM artifact's recommended sampling: generation_config.json, GGUF metadata, models.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.generation_config import artifact_sampling
from settings.base import ConfigError
from settings.stack import SamplingDefaults


def _artifact(tmp_path: Path, config: object | None) -> Path:
    if config is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(config))
    return tmp_path / "model.gguf"


def test_the_generation_config_beside_the_gguf_wins_over_its_metadata(tmp_path: Path) -> None:
    gguf = _artifact(tmp_path, {"temperature": 0.2, "top_p": 0.9, "max_new_tokens": 50})
    metadata = {"general.sampling.temp": "0.7", "general.sampling.top_k": "40"}
    assert artifact_sampling(gguf, metadata) == SamplingDefaults(temperature=0.2, top_p=0.9, top_k=40)


def test_an_artifact_without_a_generation_config_recommends_nothing(tmp_path: Path) -> None:
    assert artifact_sampling(_artifact(tmp_path, None), {}) == SamplingDefaults()


def test_do_sample_false_means_greedy(tmp_path: Path) -> None:
    gguf = _artifact(tmp_path, {"do_sample": False, "temperature": 0.6})
    assert artifact_sampling(gguf, {}) == SamplingDefaults(temperature=0.0)


def test_an_out_of_range_value_names_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"generation_config\.json: top_p"):
        artifact_sampling(_artifact(tmp_path, {"top_p": 1.5}), {})


def test_models_yaml_overrides_only_the_fields_it_sets() -> None:
    artifact = SamplingDefaults(temperature=0.2, top_p=0.9)
    assert SamplingDefaults(temperature=0.7).over(artifact) == SamplingDefaults(temperature=0.7, top_p=0.9)
