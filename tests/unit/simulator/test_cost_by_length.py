"""Melange-style profiling: capacity and price of each GPU type per prompt-length band."""

from __future__ import annotations

from simulator.experiments import cost_by_prompt_length
from simulator.workloads import TraceItem


def test_each_band_is_probed_on_each_gpu_and_priced_per_request_per_second() -> None:
    short = [TraceItem(0.0, 200, 20 + i % 40) for i in range(600)]
    items = short + [TraceItem(0.0, 3000, 20 + i % 40) for i in range(300)]
    bands = cost_by_prompt_length(items, ["a10", "a100-80"], edges=(1000,))
    assert [(b.gpu, b.low, b.high, b.requests) for b in bands] == [
        ("a10", 0, 1000, 600), ("a100-80", 0, 1000, 600), ("a10", 1000, None, 300), ("a100-80", 1000, None, 300)]
    assert all(b.capacity_rps > 0 and b.cost_per_rps > 0 for b in bands)
    short_a10, short_a100, long_a10, long_a100 = bands
    assert short_a100.capacity_rps > short_a10.capacity_rps and long_a100.capacity_rps > long_a10.capacity_rps
