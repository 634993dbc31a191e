from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from control.repository import RenderError, render_config, render_configs, render_repository
from control.stack import load_config
from settings.engine import engine_reuses_prefixes
from settings.paths import StackPaths
from settings.stack import ModelSpec, StackConfig, WorkloadKind


@pytest.fixture(scope="module")
def config() -> StackConfig:
    return load_config(StackPaths())


def _parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize("gpu_type", ["cpu", "a100"])
def test_every_rendered_config_parses_as_a_triton_model_config(config: StackConfig, gpu_type: str) -> None:
    for model in config.models:
        for name, text in render_configs(model, gpu_type).items():
            parsed = _parse(text)
            assert parsed.name == name
            assert list(parsed.version_policy.specific.versions) == [model.version]
            if parsed.platform == "ensemble" or parsed.backend == "tensorrtllm":
                continue  # no instance group / placed by the TensorRT-LLM backend itself
            kind = parsed.instance_group[0].kind
            on_cpu = gpu_type == "cpu" or name.endswith(("_preprocessing", "_postprocessing"))
            assert kind == (model_config_pb2.ModelInstanceGroup.KIND_CPU if on_cpu
                            else model_config_pb2.ModelInstanceGroup.KIND_GPU)


def test_chat_on_a_gpu_pool_is_a_tensorrt_llm_ensemble(config: StackConfig) -> None:
    chat = next(m for m in config.models if m.kind is WorkloadKind.LLM)
    configs = {name: _parse(text) for name, text in render_configs(chat, "h100").items()}
    assert set(configs) == {"chat", "chat_preprocessing", "chat_tensorrt_llm", "chat_postprocessing"}
    ensemble = configs["chat"]
    assert ensemble.platform == "ensemble"
    assert [step.model_name for step in ensemble.ensemble_scheduling.step] == [
        "chat_preprocessing", "chat_tensorrt_llm", "chat_postprocessing"]
    cpu = _parse(render_config(chat, "cpu"))
    # The CPU engine alone takes a continuation and sends its tokens' ids (a stream it served can be
    # resumed on another worker); the gateway sends neither to an engine that sends no ids. It alone
    # takes a grammar too: the gateway refuses response_format for a model TensorRT-LLM serves.
    resume_only = {"continuation", "token_ids", "grammar"}
    assert {(i.name, i.data_type) for i in ensemble.input} == {
        (i.name, i.data_type) for i in cpu.input if i.name not in resume_only}
    assert {(o.name, o.data_type) for o in ensemble.output} == {
        (o.name, o.data_type) for o in cpu.output if o.name not in resume_only}
    engine = configs["chat_tensorrt_llm"]
    assert engine.backend == "tensorrtllm"
    assert engine.dynamic_batching.priority_levels == chat.batching.priority_levels
    assert engine.model_transaction_policy.decoupled
    params = {key: value.string_value for key, value in engine.parameters.items()}
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert params["batch_scheduler_policy"] in ("guaranteed_no_evict", "max_utilization")
    assert params["enable_chunked_context"] == "true"
    assert params["max_tokens_in_paged_kv_cache"] == chat.parameters["kv_cache_tokens"]
    assert 0.0 < float(params["kv_cache_free_gpu_mem_fraction"]) < 1.0
    steps = {step.model_name: step for step in ensemble.ensemble_scheduling.step}
    produced = {"prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "priority"}
    for step in ensemble.ensemble_scheduling.step:  # every step reads only tensors already made
        assert set(step.input_map.values()) <= produced, step.model_name
        produced |= set(step.output_map.values())
        model_inputs = {i.name for i in configs[step.model_name].input}
        model_outputs = {o.name for o in configs[step.model_name].output}
        assert set(step.input_map.keys()) <= model_inputs
        assert set(step.output_map.keys()) <= model_outputs
    assert {o.name for o in ensemble.output} <= produced
    assert steps["chat_tensorrt_llm"].input_map["streaming"] == "_STREAMING"


def test_tensorrt_llm_kv_cache_reuse_is_off_unless_asked_for_and_then_rendered(config: StackConfig) -> None:
    chat = next(m for m in config.models if m.kind is WorkloadKind.LLM)
    def reuse(spec: ModelSpec) -> str:
        engine = _parse(render_configs(spec, "a100")["chat_tensorrt_llm"])
        return str(engine.parameters["enable_kv_cache_reuse"].string_value)
    assert reuse(chat) == "false" and not engine_reuses_prefixes(chat, "a100")
    asked = chat.model_copy(update={"parameters": {**chat.parameters, "trtllm_enable_kv_cache_reuse": "true"}})
    assert reuse(asked) == "true" and engine_reuses_prefixes(asked, "a100")
    assert engine_reuses_prefixes(chat, "cpu")  # the CPU engine's prefix_cache, on by default
    bad = chat.model_copy(update={"parameters": {**chat.parameters, "trtllm_enable_kv_cache_reuse": "yes"}})
    with pytest.raises(RenderError, match="enable_kv_cache_reuse"):
        render_configs(bad, "a100")


def test_bad_tensorrt_llm_settings_fail_the_render() -> None:
    spec = ModelSpec(name="chat", kind=WorkloadKind.LLM, context_tokens=1024,
                     parameters={"trtllm_batch_scheduler_policy": "fifo"})
    with pytest.raises(RenderError, match="batch_scheduler_policy"):
        render_configs(spec, "a100")


def test_gpu_repository_holds_the_ensemble_and_its_steps(config: StackConfig, artifacts_dir: Path,
                                                         tmp_path: Path) -> None:
    render_repository(config, artifacts_dir, tmp_path, gpu_type="a100")
    for name in ("chat", "chat_preprocessing", "chat_tensorrt_llm", "chat_postprocessing"):
        assert (tmp_path / name / "config.pbtxt").is_file()
        assert (tmp_path / name / "1").is_dir()
    assert (tmp_path / "embed" / "1" / "model.py").is_file()


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
    assert not parsed.HasField("dynamic_batching")  # the engine queues and orders (llm.pbtxt.j2)
    optional = {i.name for i in parsed.input if i.optional}
    assert optional == {"max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "priority", "continuation",
                        "grammar"}
    assert parsed.parameters["kv_cache_tokens"].string_value == chat.parameters["kv_cache_tokens"]


def test_versions_loaded_side_by_side_share_the_engine_threads(config: StackConfig) -> None:
    chat = next(m for m in config.models if m.kind is WorkloadKind.LLM)
    assert chat.parameters["n_threads"] == "2"

    def threads(spec: ModelSpec, versions: list[int]) -> str:
        parsed = _parse(render_config(spec, "cpu", versions))
        assert list(parsed.version_policy.specific.versions) == versions
        return str(parsed.parameters["n_threads"].string_value)

    assert threads(chat, [1]) == "2"
    assert threads(chat, [1, 2]) == "1"  # a canary: two engines of one thread each on the two cores
    assert threads(chat, [1, 2, 3]) == "1"  # never fewer than one
    four = chat.model_copy(update={"parameters": {**chat.parameters, "n_threads": "4"}})
    assert threads(four, [1, 2]) == "2"
    default = ModelSpec(name="chat", kind=WorkloadKind.LLM, context_tokens=1024)  # the engine's default: 2
    assert threads(default, [3, 4]) == "1"
    assert "n_threads" not in _parse(render_config(default, "cpu")).parameters
    assert chat.parameters["n_threads"] == "2"  # the configured spec is not changed


def test_a_thread_count_that_is_not_a_number_fails_the_render() -> None:
    spec = ModelSpec(name="chat", kind=WorkloadKind.LLM, context_tokens=1024, parameters={"n_threads": "two"})
    with pytest.raises(RenderError, match="n_threads"):
        render_config(spec, "cpu", [1, 2])


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
