"""Warm-up requests of the fidelity benches (bench.studies.fidelity_trace.warm_up_item), on the real tokenizer."""

import random
from pathlib import Path

from bench.studies.fidelity_trace import fit_messages, warm_up_item
from gateway.tokenization import LlmTokenizer


def test_a_warm_up_request_has_the_asked_length_and_shares_no_kv_block_with_a_measured_one(
        artifacts_dir: Path) -> None:
    tokenizer = LlmTokenizer(artifacts_dir / "chat" / "model.gguf")
    measured_messages, measured_tokens = fit_messages(tokenizer, "r000", 120, random.Random(0))
    measured = {"request_id": "r000", "tenant": "demo-standard", "prompt_tokens": measured_tokens,
                "messages": measured_messages, "max_tokens": 8}
    warm = warm_up_item(tokenizer, measured, 120)
    assert warm["request_id"] == "warm-up" and warm["max_tokens"] == 8
    assert abs(warm["prompt_tokens"] - 120) <= 1
    block = 16  # the chat engine's KV block: a shared first block would be a prefix-cache hit
    prompts = [tokenizer.apply_chat_template(m) for m in (warm["messages"], measured_messages)]
    shared = next((prompts[0][:i] for i, (a, b) in enumerate(zip(*prompts, strict=False)) if a != b), prompts[0])
    assert tokenizer.count(shared) < block
