"""KV block accounting: growth of decoding sequences and the longest segment the free blocks hold."""

from __future__ import annotations

from simulator.kv_blocks import blocks_for, growth_blocks, max_decode_steps


def test_growth_counts_only_blocks_past_those_held() -> None:
    assert blocks_for(0) == 0 and blocks_for(1) == 1 and blocks_for(16) == 1 and blocks_for(17) == 2
    assert growth_blocks([(16, 1)], 1) == 1 and growth_blocks([(15, 1)], 1) == 0
    assert growth_blocks([(10, 3)], 20) == 0  # more held than needed: nothing to add


def test_max_decode_steps_is_the_last_step_count_whose_growth_fits() -> None:
    growing = [(100, 7), (37, 3), (16, 1)]
    for free in range(0, 12):
        steps = max_decode_steps(growing, free, 200)
        brute = max((k for k in range(0, 201) if growth_blocks(growing, k) <= free), default=0)
        assert steps == brute
