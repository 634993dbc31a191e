from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from control.config import ModelSpec, StackConfig, WorkloadKind
from control.paths import StackPaths
from control.repository import RenderError, render_config, render_repository
from control.stack import load_config


@pytest.fixture(scope="module")
def config() -> StackConfig:
    return load_config(StackPaths())


def _parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize("gpu_type", ["cpu", "a100"])
def test_every_rendered_config_parses_as_a_triton_model_config(config: StackConfig, gpu_type: str) -> None:
    for model in config.models:
        parsed = _parse(render_config(model, gpu_type))
        assert parsed.name == model.name
        assert list(parsed.version_policy.specific.versions) == [model.version]
        kind = parsed.instance_group[0].kind
        assert kind == (model_config_pb2.ModelInstanceGroup.KIND_CPU if gpu_type == "cpu"
                        else model_config_pb2.ModelInstanceGroup.KIND_GPU)


def test_batched_models_render_their_batching_settings(config: StackConfig) -> None:
    embed = next(m for m in config.models if m.name == "embed")
    parsed = _parse(render_config(embed, "cpu"))
    assert parsed.max_batch_size == embed.batching.max_batch_size
    assert list(parsed.dynamic_batching.preferred_batch_size) == list(embed.batching.preferred_batch_sizes)
    assert parsed.dynamic_batching.priority_levels == 3
    assert parsed.dynamic_batching.default_queue_policy.max_queue_size == embed.batching.queue.max_queue_size
    assert parsed.model_warmup[0].inputs["text"].input_data_file == "text_sample"


def test_chat_is_decoupled_with_optional_sampling_inputs(config: StackConfig) -> None:
    chat = next(m for m in config.models if m.kind is WorkloadKind.LLM)
    parsed = _parse(render_config(chat, "cpu"))
    assert parsed.model_transaction_policy.decoupled
    optional = {i.name for i in parsed.input if i.optional}
    assert optional == {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "priority"}
    assert parsed.parameters["kv_cache_tokens"].string_value == chat.parameters["kv_cache_tokens"]


def test_chat_kv_pool_defaults_to_two_contexts() -> None:
    spec = ModelSpec(name="chat", kind=WorkloadKind.LLM, context_tokens=1024)
    parsed = _parse(render_config(spec, "cpu"))
    assert parsed.parameters["kv_cache_tokens"].string_value == "2048"


def test_render_places_adapter_artifacts_and_warmup(config: StackConfig, artifacts_dir: Path, tmp_path: Path) -> None:
    assert render_repository(config, artifacts_dir, tmp_path) == [m.name for m in config.models]
    assert (tmp_path / "chat" / "1" / "model.gguf").stat().st_size > 50_000_000
    assert (tmp_path / "vision" / "1" / "labels.txt").read_text().splitlines()[281] == "tabby"
    assert (tmp_path / "vision" / "warmup" / "image_sample").stat().st_size > 1000
    assert "TritonPythonModel" in (tmp_path / "embed" / "1" / "model.py").read_text()
    render_repository(config, artifacts_dir, tmp_path)  # re-render replaces in place
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(m.name for m in config.models)


def test_missing_artifacts_fail_the_render_and_leave_no_partial_model(tmp_path: Path) -> None:
    spec = ModelSpec(name="ghost", kind=WorkloadKind.TABULAR)
    config = StackConfig.model_validate({"triton": {}, "pools": [], "models": [spec.model_dump()]})
    with pytest.raises(RenderError, match="no artifacts"):
        render_repository(config, tmp_path / "nothing", tmp_path / "repo")
    assert list((tmp_path / "repo").iterdir()) == []
