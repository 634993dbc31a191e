"""Constrained decoding on the real SmolLM2 GGUF: the output follows the grammar (no Triton)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import llguidance
import pytest

from python_backends.batching import InvalidInputError
from python_backends.chat.engine import BatchEngine
from python_backends.chat.params import GenerationParams
from settings.engine import EngineConfig

PROMPT = ("<|im_start|>user\nWhat is the capital of France and its population? Answer in JSON."
          "<|im_end|>\n<|im_start|>assistant\n")
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
          "properties": {"city": {"type": "string", "maxLength": 20}, "population": {"type": "integer"}}}
GRAMMAR = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA)


@pytest.fixture(scope="module")
def engine(artifacts_dir: Path) -> Iterator[BatchEngine]:
    engine = BatchEngine.load(artifacts_dir / "chat" / "model.gguf",
                              EngineConfig(context_tokens=512, kv_cache_tokens=2048, max_running=8))
    yield engine
    engine.runtime.close()


def test_sampled_answers_at_temperature_one_follow_the_schema(engine: BatchEngine) -> None:
    for seed in range(4):
        sink = engine.generate(PROMPT, GenerationParams(max_tokens=80, temperature=1.0, seed=seed, grammar=GRAMMAR))
        assert sink.deltas[-1].finish_reason == "stop", sink.text
        answer = json.loads(sink.text)
        assert set(answer) == {"city", "population"} and isinstance(answer["population"], int)


def test_a_grammar_that_does_not_compile_is_invalid_input(engine: BatchEngine) -> None:
    with pytest.raises(InvalidInputError, match="grammar"):
        engine.generate(PROMPT, GenerationParams(max_tokens=8, grammar="not a grammar"))


def test_a_continuation_the_grammar_does_not_allow_is_invalid_input(engine: BatchEngine) -> None:
    not_json = tuple(engine.tokenize("Paris"))
    with pytest.raises(InvalidInputError, match="continuation"):
        engine.generate(PROMPT, GenerationParams(max_tokens=8, grammar=GRAMMAR), continuation=not_json)


def test_a_resumed_constrained_generation_continues_exactly(engine: BatchEngine) -> None:
    params = GenerationParams(max_tokens=80, temperature=1.0, seed=7, grammar=GRAMMAR)
    whole = engine.generate(PROMPT, params)
    ids = [t for d in whole.deltas for t in d.token_ids]
    resumed = engine.generate(PROMPT, params, continuation=tuple(ids[:3]))
    assert whole.text.endswith(resumed.text) and json.loads(whole.text)
