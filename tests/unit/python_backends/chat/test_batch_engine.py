"""The batching engine on the real SmolLM2 GGUF (no Triton)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from python_backends.batching import InvalidInputError
from python_backends.chat.engine import BatchEngine, EngineSaturatedError, ListSink
from python_backends.chat.params import GenerationParams
from settings.engine import EngineConfig

TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
PROMPT = TEMPLATE.format("What is the capital of France? Answer in one word.")
QUESTIONS = ("What is the capital of France?", "Name three colours.", "Write a haiku about rain.",
             "What is 2+2?", "Tell me about dogs.", "Why is the sky blue?", "List some fruits.",
             "Who wrote Hamlet?")
GREEDY = GenerationParams(max_tokens=40, temperature=0.0)


def _engine(artifacts_dir: Path, **overrides: int) -> BatchEngine:
    settings = {"context_tokens": 512, "kv_cache_tokens": 2048, "max_running": 8, **overrides}
    return BatchEngine.load(artifacts_dir / "chat" / "model.gguf", EngineConfig(**settings))


@pytest.fixture(scope="module")
def engine(artifacts_dir: Path) -> Iterator[BatchEngine]:
    engine = _engine(artifacts_dir)
    yield engine
    engine.runtime.close()


def _together(engine: BatchEngine, prompts: list[str], params: GenerationParams) -> list[ListSink]:
    sinks = [ListSink() for _ in prompts]
    for prompt, sink in zip(prompts, sinks, strict=True):
        engine.submit(prompt, params, sink)
    while engine.step():
        pass
    return sinks


def test_greedy_answer_is_right_and_reports_usage(engine: BatchEngine) -> None:
    sink = engine.generate(PROMPT, GenerationParams(max_tokens=24, temperature=0.0))
    last = sink.deltas[-1]
    assert "Paris" in sink.text
    assert last.finish_reason == "stop"
    assert last.prompt_tokens == len(engine.tokenize(PROMPT))
    assert 0 < last.completion_tokens <= 24


def test_eight_prompts_together_give_the_same_greedy_text_as_each_alone(engine: BatchEngine) -> None:
    prompts = [TEMPLATE.format(q) for q in QUESTIONS]
    alone = [engine.generate(p, GREEDY).text for p in prompts]
    together = _together(engine, prompts, GREEDY)
    assert [s.text for s in together] == alone
    assert engine.pool.used_blocks == 0


def test_seeded_sampling_depends_only_on_the_request(engine: BatchEngine) -> None:
    prompt = "Tell me a story:"
    seeded = [GenerationParams(max_tokens=16, temperature=1.0, seed=seed) for seed in (1, 2)]
    alone = [engine.generate(prompt, params).text for params in seeded]
    assert alone[0] != alone[1]
    mates = [TEMPLATE.format(q) for q in QUESTIONS[:3]]
    sinks = [ListSink() for _ in mates]
    for mate, sink in zip(mates, sinks, strict=True):
        engine.submit(mate, GenerationParams(max_tokens=16, temperature=1.0), sink)
    assert engine.generate(prompt, seeded[0]).text == alone[0]
    while engine.step():
        pass


def test_max_tokens_ends_with_length(engine: BatchEngine) -> None:
    last = engine.generate("Count: one, two, three,", GenerationParams(max_tokens=3, temperature=0.0)).deltas[-1]
    assert (last.finish_reason, last.completion_tokens) == ("length", 3)


def test_stop_string_ends_generation_without_emitting_it(engine: BatchEngine) -> None:
    sink = engine.generate(PROMPT, GenerationParams(max_tokens=40, temperature=0.0, stop=("Paris",)))
    assert sink.deltas[-1].finish_reason == "stop"
    assert "Paris" not in sink.text


def test_prompt_longer_than_a_sequence_is_rejected(engine: BatchEngine) -> None:
    with pytest.raises(InvalidInputError, match="prompt"):
        engine.submit("word " * 600, GenerationParams(max_tokens=4), ListSink())


def test_a_new_generation_is_refused_while_the_waiting_queue_is_full(artifacts_dir: Path) -> None:
    engine = _engine(artifacts_dir, max_waiting=2)
    try:
        accepted = [ListSink(), ListSink()]
        for sink in accepted:
            engine.submit(PROMPT, GenerationParams(max_tokens=2, temperature=0.0), sink)
        with pytest.raises(EngineSaturatedError, match="exceeds maximum queue size 2"):
            engine.submit(PROMPT, GenerationParams(max_tokens=2, temperature=0.0), ListSink())
        while engine.step():
            pass
        assert all(sink.deltas[-1].finish_reason == "length" for sink in accepted)
        engine.submit(PROMPT, GenerationParams(max_tokens=2, temperature=0.0), ListSink())  # room again
    finally:
        engine.runtime.close()


def test_cancelled_sequence_frees_its_blocks_in_that_step(engine: BatchEngine) -> None:
    cancelled = {"flag": False}
    victim = ListSink(cancel=lambda _: cancelled["flag"])
    other = ListSink()
    long = GenerationParams(max_tokens=200, temperature=0.0)
    seq = engine.submit(TEMPLATE.format("Write a long essay about the sea."), long, victim)
    engine.submit(TEMPLATE.format("Write a long essay about trees."), long, other)
    while seq.generated < 5:
        engine.step()
    slot = seq.slot
    assert slot is not None and engine.runtime.used_cells(slot) > 0
    held = engine.pool.held(seq.number)
    used = engine.pool.used_blocks
    cancelled["flag"] = True
    engine.step()
    assert victim.deltas[-1].finish_reason == "cancelled"
    assert engine.pool.held(seq.number) == 0
    assert engine.pool.used_blocks <= used - held + 1  # the other sequence may grow by one block
    # its cells are cleared, or (prefix reuse) kept only as the slot's cached prefix, in no pool block
    assert engine.runtime.used_cells(slot) in (0, seq.computed)
    while engine.step():
        pass
    assert other.deltas[-1].finish_reason in ("stop", "length")


def test_short_request_gets_its_first_token_while_long_generations_run(engine: BatchEngine) -> None:
    long = GenerationParams(max_tokens=150, temperature=0.0)
    longs = [ListSink() for _ in range(4)]
    for i, sink in enumerate(longs):
        engine.submit(TEMPLATE.format(f"Write a long story about a ship named {i}."), long, sink)
    for _ in range(10):
        engine.step()
    short = ListSink()
    engine.submit(TEMPLATE.format("What is 2+2?"), GenerationParams(max_tokens=8, temperature=0.0), short)
    steps = 0
    while not short.deltas:
        engine.step()
        steps += 1
    assert steps <= 3
    assert not any(s.done for s in longs)
    while engine.step():
        pass


def test_pool_exhaustion_preempts_and_later_completes_with_the_same_output(artifacts_dir: Path) -> None:
    engine = _engine(artifacts_dir, kv_cache_tokens=256, context_tokens=256)
    try:
        prompts = [TEMPLATE.format(f"Write a long story about a ship named {i}.") for i in range(4)]
        params = GenerationParams(max_tokens=60, temperature=0.0)
        alone = [engine.generate(p, params).text for p in prompts]
        assert engine.scheduler.preemptions_total == 0
        together = _together(engine, prompts, params)
        assert engine.scheduler.preemptions_total > 0
        assert [s.text for s in together] == alone
        assert all(s.deltas[-1].finish_reason in ("stop", "length") for s in together)
        assert engine.pool.used_blocks == 0
    finally:
        engine.runtime.close()


def test_prefix_reuse_skips_the_shared_prefill_and_changes_no_output(artifacts_dir: Path) -> None:
    prompts = [TEMPLATE.format(q) for q in QUESTIONS[:4]]
    fresh = _engine(artifacts_dir, prefix_cache=False)
    try:
        expected = [fresh.generate(p, GREEDY).text for p in prompts]
        assert fresh.stats().prefix_hit_tokens_total == 0
    finally:
        fresh.runtime.close()
    cached = _engine(artifacts_dir, prefix_cache=True)
    try:
        first = [cached.generate(p, GREEDY).text for p in prompts]
        prefill_before = cached.prefill_tokens_total
        again = [s.text for s in _together(cached, prompts, GREEDY)]
        stats = cached.stats()
        prompt_tokens = sum(len(cached.tokenize(p)) for p in prompts)
    finally:
        cached.runtime.close()
    assert first == expected and again == expected
    assert stats.prefix_hit_tokens_total >= prompt_tokens - len(prompts)  # every prompt but its last token
    assert stats.prefill_tokens_total - prefill_before == len(prompts)   # one token each, for its logits
    assert stats.kv_blocks_used == 0


SYSTEM_PROMPT = ("<|im_start|>system\n" + "You are a careful assistant for a railway company. " * 12
                 + "<|im_end|>\n")


def test_a_running_sequences_prefix_is_copied_to_a_newcomer_and_changes_no_output(artifacts_dir: Path) -> None:
    prompts = [SYSTEM_PROMPT + TEMPLATE.format(q) for q in QUESTIONS[:3]]
    fresh = _engine(artifacts_dir, prefix_cache=False)
    try:
        expected = [fresh.generate(p, GREEDY).text for p in prompts]
    finally:
        fresh.runtime.close()
    cached = _engine(artifacts_dir, prefix_cache=True)
    try:
        sinks = [ListSink() for _ in prompts]
        cached.submit(prompts[0], GREEDY, sinks[0])
        while cached.prefill_tokens_total < len(cached.tokenize(prompts[0])):
            assert cached.step()  # the first prompt prefilled; it decodes on in its slot
        prefill_before = cached.prefill_tokens_total
        for prompt, sink in zip(prompts[1:], sinks[1:], strict=True):
            cached.submit(prompt, GREEDY, sink)
        while cached.step():
            pass
        stats = cached.stats()
        system_tokens = len(cached.tokenize(SYSTEM_PROMPT))
        question_tokens = sum(len(cached.tokenize(p)) - system_tokens for p in prompts[1:])
    finally:
        cached.runtime.close()
    assert [s.text for s in sinks] == expected
    assert stats.prefix_hit_tokens_total >= 2 * (system_tokens - 2)  # each copied all but the boundary
    assert stats.prefill_tokens_total - prefill_before <= question_tokens + 4


def test_a_cold_burst_sharing_a_system_prompt_computes_it_about_once(artifacts_dir: Path) -> None:
    # The first prompt's prefill takes each step's whole budget until its last chunk, so the others
    # are admitted then and copy all but less than a chunk of the shared prompt.
    prompts = [SYSTEM_PROMPT + TEMPLATE.format(q) for q in QUESTIONS[3:6]]
    cached = _engine(artifacts_dir, prefix_cache=True)
    try:
        sinks = _together(cached, prompts, GREEDY)
        lengths = [len(cached.tokenize(p)) for p in prompts]
        system_tokens = len(cached.tokenize(SYSTEM_PROMPT))
        prefilled, chunk = cached.prefill_tokens_total, cached.config.prefill_chunk_tokens
    finally:
        cached.runtime.close()
    assert all(s.done for s in sinks)
    assert prefilled <= lengths[0] + sum(n - system_tokens + chunk for n in lengths[1:])
    assert prefilled < sum(lengths) - system_tokens  # well under computing the shared prompt twice


def test_a_stream_interval_sends_the_first_text_at_once_then_every_n_tokens_and_the_same_text(
        engine: BatchEngine, artifacts_dir: Path) -> None:
    prompt = TEMPLATE.format(QUESTIONS[2])
    every_token = engine.generate(prompt, GREEDY)
    chunked_engine = _engine(artifacts_dir, stream_interval_tokens=4)
    try:
        chunked = chunked_engine.generate(prompt, GREEDY)
    finally:
        chunked_engine.runtime.close()
    assert chunked.text == every_token.text
    last, expected = chunked.deltas[-1], every_token.deltas[-1]
    assert (last.finish_reason, last.prompt_tokens, last.completion_tokens) == (
        expected.finish_reason, expected.prompt_tokens, expected.completion_tokens)
    tokens = expected.completion_tokens
    assert chunked.deltas[0].text == every_token.deltas[0].text  # the first token's text is not held back
    assert len(chunked.deltas) <= 2 + tokens // 4 < len(every_token.deltas)


def test_each_model_step_is_counted_with_its_wall_time_and_attended_positions(engine: BatchEngine) -> None:
    before = engine.stats()
    prompt_tokens = len(engine.tokenize(PROMPT))
    sink = engine.generate(PROMPT, GenerationParams(max_tokens=8, temperature=0.0))
    after = engine.stats()
    steps = after.steps_total - before.steps_total
    generated = sink.deltas[-1].completion_tokens
    # Chunked prefill (prefill_chunk_tokens a step), then one step per sampled token after the first.
    chunk = engine.config.prefill_chunk_tokens
    assert steps == -(-prompt_tokens // chunk) + generated - (0 if sink.deltas[-1].finish_reason == "stop" else 1)
    assert after.step_seconds_total > before.step_seconds_total
    decoded = after.decode_tokens_total - before.decode_tokens_total
    # The prompt attends causally to itself; each decode token to everything before it.
    expected = prompt_tokens * (prompt_tokens - 1) / 2 + sum(prompt_tokens + i for i in range(decoded))
    assert after.attention_positions_total - before.attention_positions_total == pytest.approx(expected)


def _resumed(engine: BatchEngine, prompt: str, params: GenerationParams, after_deltas: int) -> tuple[str, str]:
    """The whole text of one run, and the text a client gets when the first engine stops after
    ``after_deltas`` deltas and a continuation of their token ids produces the rest."""
    whole = engine.generate(prompt, params)
    assert len(whole.deltas) > after_deltas, "the generation is too short for this test"
    sent = whole.deltas[:after_deltas]
    continuation = tuple(t for d in sent for t in d.token_ids)
    rest = engine.generate(prompt, params, continuation=continuation)
    assert rest.deltas[-1].completion_tokens == whole.deltas[-1].completion_tokens
    assert rest.deltas[-1].prompt_tokens == whole.deltas[-1].prompt_tokens
    return whole.text, "".join(d.text for d in sent) + rest.text


def test_every_delta_carries_the_ids_of_its_tokens(engine: BatchEngine) -> None:
    sink = engine.generate(PROMPT, GenerationParams(max_tokens=24, temperature=0.0))
    ids = [t for d in sink.deltas for t in d.token_ids]
    assert len(ids) == sink.deltas[-1].completion_tokens
    assert b"".join(engine.runtime.piece(t) for t in ids).decode() == sink.text


@pytest.mark.parametrize("params", [
    GenerationParams(max_tokens=40, temperature=0.0),
    GenerationParams(max_tokens=40, temperature=1.0, top_p=0.95, seed=1234),
    GenerationParams(max_tokens=40, temperature=0.8, top_k=40, seed=7, stop=("\n\n",)),
], ids=["greedy", "seeded", "seeded-stop"])
def test_a_continuation_goes_on_exactly_as_the_first_run_would_have(engine: BatchEngine,
                                                                    params: GenerationParams) -> None:
    prompt = TEMPLATE.format("Write a haiku about rain.")
    for after in (1, 3):
        whole, resumed = _resumed(engine, prompt, params, after)
        assert resumed == whole


def test_a_continuation_with_bad_ids_is_refused(engine: BatchEngine) -> None:
    with pytest.raises(InvalidInputError, match="continuation"):
        engine.submit(PROMPT, GREEDY, ListSink(), continuation=(engine.runtime.n_vocab + 5,))
    with pytest.raises(InvalidInputError, match="continuation"):
        engine.submit(PROMPT, GenerationParams(max_tokens=2, temperature=0.0), ListSink(), continuation=(1, 2))
