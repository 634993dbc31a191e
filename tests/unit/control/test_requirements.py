"""control.requirements: the one builder of a version's runtime requirements."""

from __future__ import annotations

import pytest

from control.registry import RuntimeRequirements
from control.requirements import runtime_requirements
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind

CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="h100", gpu_type="h100", models=("chat",)),
           PoolSpec(name="l4", gpu_type="l4", base_port=8200, models=("chat", "embed")),
           PoolSpec(name="cpu", base_port=8300, models=("embed",))),
    models=(ModelSpec(name="chat", kind=WorkloadKind.LLM, context_tokens=4096),
            ModelSpec(name="embed", kind=WorkloadKind.EMBEDDING)),
)


def test_a_configured_model_gets_its_kind_the_gpu_types_of_its_pools_and_its_context() -> None:
    assert runtime_requirements(CONFIG, "chat", min_gpu_memory_gb=16.0, quantization="q4_1") == RuntimeRequirements(
        backend="python", kind="llm", gpu_types=("h100", "l4"), min_gpu_memory_gb=16.0, quantization="q4_1",
        max_context_tokens=4096)
    embed = runtime_requirements(CONFIG, "embed")
    assert (embed.gpu_types, embed.max_context_tokens) == (("cpu", "l4"), None)


def test_a_given_kind_wins_and_serves_a_model_that_is_not_configured() -> None:
    assert runtime_requirements(CONFIG, "embed", WorkloadKind.RERANK).kind == "rerank"
    assert runtime_requirements(None, "new", WorkloadKind.VISION) == RuntimeRequirements(backend="python",
                                                                                       kind="vision")


def test_no_kind_for_an_unconfigured_model_is_refused() -> None:
    with pytest.raises(ValueError, match="'new' is not configured"):
        runtime_requirements(CONFIG, "new")
