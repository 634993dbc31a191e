"""Paged KV accounting of the simulated LLM engine: blocks allocated on demand as sequences grow.

A sequence holding ``held`` blocks with ``tokens`` tokens in its KV cache needs
``blocks_for(tokens + k) - held`` more blocks to run ``k`` more decode iterations (one token each).
``max_decode_steps`` finds how many identical decode iterations the free blocks allow, so that a
fast-forwarded segment ends exactly where a step-by-step engine would first run out of blocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.perf.hardware import KV_BLOCK_TOKENS

WATERMARK_SHARE = 0.01  # vLLM's default watermark: admission leaves 1 % of the blocks free for growth


def blocks_for(tokens: int) -> int:
    """Blocks that hold ``tokens`` KV tokens."""
    return math.ceil(max(0, tokens) / KV_BLOCK_TOKENS)


def growth_blocks(growing: Sequence[tuple[int, int]], steps: int) -> int:
    """More blocks that sequences given as ``(kv_tokens, held_blocks)`` need after ``steps`` decode
    iterations (0 when their held blocks cover it)."""
    return sum(max(0, blocks_for(tokens + steps) - held) for tokens, held in growing)


def max_decode_steps(growing: Sequence[tuple[int, int]], free_blocks: int, limit: int) -> int:
    """The most decode iterations, at most ``limit``, whose growth fits ``free_blocks`` (0 when not
    even one does). Growth is monotone in the step count, so a bisection finds it."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if growth_blocks(growing, middle) <= free_blocks:
            low = middle
        else:
            high = middle - 1
    return low
