"""The small trace of the real-stack fidelity check, written once as JSON with its chat messages.

``build_trace(options, tokenizer)`` derives the requests from the Azure 2023 conversation trace
(``simulator.small_trace``: the first ``count`` requests, prompt tokens / 6 clipped to 16 … 768,
output tokens / 4 clipped to 4 … 96, the trace's own arrival pattern time-scaled to
``rate_per_s``), draws each request's tenant from the demo tenants (20 % premium, 60 % standard,
20 % batch, seeded) and writes for each a chat conversation whose templated prompt has exactly
(or, rarely, one token more than) the target length, counted with the gateway's own tokenizer
(``gateway.tokenization.LlmTokenizer``: the served GGUF's vocabulary and chat template). Each
conversation starts with a system line unique to the request, so that no two prompts share a
prefix as long as a KV block (16 tokens): the engine's prefix cache never hits (not modelled).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.studies.fit_cpu_worker import WORDS
from gateway.tokenization import LlmTokenizer
from simulator.small_trace import Shrink, small_trace
from simulator.workloads import DEFAULT_TRACES_DIR, load_azure

PROMPT_SHRINK = Shrink(6.0, 16, 768)
OUTPUT_SHRINK = Shrink(4.0, 4, 96)
TENANT_SHARES: tuple[tuple[str, float], ...] = (("demo-premium", 0.2), ("demo-standard", 0.6), ("demo-batch", 0.2))
API_KEYS = {"demo-premium": "demo-premium-key", "demo-standard": "demo-standard-key",
            "demo-batch": "demo-batch-key"}  # the public demo keys of config/tenants.yaml


@dataclass(frozen=True)
class TraceOptions:
    count: int = 100
    rate_per_s: float = 0.6
    seed: int = 0
    traces_dir: Path = DEFAULT_TRACES_DIR


def _messages(request_id: str, words: list[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": f"Session {request_id}. Answer the user."},
            {"role": "user", "content": "Continue this text: " + " ".join(words)}]


def fit_messages(tokenizer: LlmTokenizer, request_id: str, target_tokens: int,
                 rng: random.Random) -> tuple[list[dict[str, str]], int]:
    """Messages whose templated prompt has ``target_tokens`` tokens (one more at most when no
    word count hits it exactly), and that count; the shortest possible when the target is below it."""
    words = rng.choices(WORDS, k=target_tokens)

    def count(n: int) -> int:
        return tokenizer.count(tokenizer.apply_chat_template(_messages(request_id, words[:n])))

    low, high = 0, len(words)
    while low < high:  # fewest words reaching the target
        middle = (low + high) // 2
        if count(middle) >= target_tokens:
            high = middle
        else:
            low = middle + 1
    return _messages(request_id, words[:low]), count(low)


def warm_up_item(tokenizer: LlmTokenizer, like: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    """A warm-up request like ``like`` with a ``prompt_tokens``-token prompt that shares no KV
    block with any request made by ``fit_messages`` (its own system line and words): warming up
    with a measured request's own conversation would leave its prompt in the engine's prefix
    cache, and that request's TTFT would not be a cold one."""
    messages, tokens = fit_messages(tokenizer, "warm-up", prompt_tokens, random.Random(-1))
    return {**like, "request_id": "warm-up", "messages": messages, "prompt_tokens": tokens}


def build_trace(options: TraceOptions, tokenizer: LlmTokenizer) -> list[dict[str, Any]]:
    """The requests, in arrival order, as JSON-ready objects (module docstring)."""
    items = small_trace(load_azure("conv", options.traces_dir, limit=options.count), options.count,
                        PROMPT_SHRINK, OUTPUT_SHRINK, options.rate_per_s)
    rng = random.Random(options.seed)
    tenants = rng.choices([name for name, _ in TENANT_SHARES], [share for _, share in TENANT_SHARES],
                          k=len(items))
    trace = []
    for index, (item, tenant) in enumerate(zip(items, tenants, strict=True)):
        request_id = f"r{index:03d}"
        messages, prompt_tokens = fit_messages(tokenizer, request_id, item.prompt_tokens, rng)
        trace.append({"request_id": request_id, "tenant": tenant, "arrival_s": round(item.arrival_s, 6),
                      "target_prompt_tokens": item.prompt_tokens, "prompt_tokens": prompt_tokens,
                      "max_tokens": item.output_tokens, "messages": messages})
    return trace
