"""The llama.cpp engine on the real SmolLM2 GGUF (no Triton)."""

from pathlib import Path

import pytest

from python_backends.batching import InvalidInputError
from python_backends.chat.engine import Delta, LlamaEngine
from python_backends.chat.params import GenerationParams

PROMPT = "<|im_start|>user\nWhat is the capital of France? Answer in one word.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def engine(artifacts_dir: Path) -> LlamaEngine:
    return LlamaEngine(artifacts_dir / "chat" / "model.gguf", context_tokens=512, n_threads=2)


def _run(engine: LlamaEngine, params: GenerationParams, prompt: str = PROMPT,
         cancel_after: int | None = None) -> tuple[str, Delta]:
    deltas: list[Delta] = []
    for delta in engine.generate(prompt, params, lambda: cancel_after is not None and len(deltas) >= cancel_after):
        deltas.append(delta)
    return "".join(d.text for d in deltas), deltas[-1]


def test_greedy_answer_is_right_and_reports_usage(engine: LlamaEngine) -> None:
    text, last = _run(engine, GenerationParams(max_tokens=24, temperature=0.0))
    assert "Paris" in text
    assert last.finish_reason == "stop"
    assert last.prompt_tokens == len(engine.tokenize(PROMPT))
    assert 0 < last.completion_tokens <= 24


def test_greedy_decoding_is_deterministic(engine: LlamaEngine) -> None:
    params = GenerationParams(max_tokens=20, temperature=0.0)
    assert _run(engine, params, "Once upon a time")[0] == _run(engine, params, "Once upon a time")[0]


def test_seeded_sampling_repeats_and_seeds_differ(engine: LlamaEngine) -> None:
    runs = {seed: _run(engine, GenerationParams(max_tokens=16, temperature=1.0, seed=seed), "Tell me a story:")[0]
            for seed in (1, 2)}
    again = _run(engine, GenerationParams(max_tokens=16, temperature=1.0, seed=1), "Tell me a story:")[0]
    assert again == runs[1]
    assert runs[1] != runs[2]


def test_max_tokens_ends_with_length(engine: LlamaEngine) -> None:
    _, last = _run(engine, GenerationParams(max_tokens=3, temperature=0.0), "Count: one, two, three,")
    assert (last.finish_reason, last.completion_tokens) == ("length", 3)


def test_stop_string_ends_generation_without_emitting_it(engine: LlamaEngine) -> None:
    text, last = _run(engine, GenerationParams(max_tokens=40, temperature=0.0, stop=("Paris",)))
    assert last.finish_reason == "stop"
    assert "Paris" not in text


def test_cancellation_stops_at_the_next_token(engine: LlamaEngine) -> None:
    _, last = _run(engine, GenerationParams(max_tokens=200, temperature=0.0), "Write a long essay:", cancel_after=3)
    assert last.finish_reason == "cancelled"
    assert last.completion_tokens <= 4


def test_prompt_longer_than_the_context_is_rejected(engine: LlamaEngine) -> None:
    with pytest.raises(InvalidInputError, match="prompt"):
        _run(engine, GenerationParams(max_tokens=4), "word " * 600)
