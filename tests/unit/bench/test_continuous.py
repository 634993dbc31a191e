"""What ``bench.continuous.closed_loop`` counts: every text chunk that arrives in the window."""

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from bench.chat import StreamTiming, timing
from bench.continuous import ENGINE_WINDOW_KEYS, Cycle, closed_loop, cycle_figures, engine_window, streaming_spans
from bench.triton_stats import ENGINE_COUNTERS

CHUNK_GAP_S = 0.01


class PacedChat:
    """A stand-in for ``GatewayChat``: each generation streams ``chunks`` text chunks, one every
    ``CHUNK_GAP_S``, each worth ``tokens_per_chunk`` completion tokens."""

    def __init__(self, chunks: int, tokens_per_chunk: int = 1) -> None:
        self.chunks = chunks
        self.tokens_per_chunk = tokens_per_chunk

    async def stream(self, arrivals: list[float] | None = None) -> StreamTiming:
        started = time.perf_counter()
        times: list[float] = []
        for _ in range(self.chunks):
            await asyncio.sleep(CHUNK_GAP_S)
            times.append(time.perf_counter())
            if arrivals is not None:
                arrivals.append(times[-1])
        return timing(started, times, self.chunks * self.tokens_per_chunk)


def test_a_generation_longer_than_the_window_still_counts_what_it_streamed_inside_it() -> None:
    # One generation of 2 s, a 0.4 s window after 0.2 s: nothing ends in the window, yet about
    # 40 chunks arrive in it (the old count of ended generations said 0 tokens/s).
    served = asyncio.run(closed_loop(PacedChat(chunks=200), 1, warmup_s=0.2, duration_s=0.4))  # type: ignore[arg-type]
    assert served["generations"] == 0
    assert served["window_chunks"] > 10
    assert served["aggregate_tokens_per_s"] == served["window_chunks"] / 0.4


def test_chunks_are_converted_to_tokens_by_the_generations_that_ended_in_the_window() -> None:
    served = asyncio.run(closed_loop(PacedChat(chunks=5, tokens_per_chunk=4), 2, warmup_s=0.1,  # type: ignore[arg-type]
                                     duration_s=0.5))
    assert served["generations"] > 0
    assert served["tokens_per_chunk"] == 4.0
    assert served["aggregate_tokens_per_s"] == served["window_chunks"] * 4.0 / 0.5


def test_the_token_weighted_gap_is_what_a_rate_sees_not_the_median_of_generations() -> None:
    # Two quick generations (gaps of 10 ms) and one slow one (gaps of 50 ms), 11 chunks each: the
    # median of per-generation means says 10 ms, the window's tokens streamed at a mean of 23.3 ms.
    def cycle(client: int, start: float, gap_s: float) -> Cycle:
        chunks = [start + 0.02 + k * gap_s for k in range(11)]
        return Cycle(client, start, chunks, ended=chunks[-1] + 0.01, timing=timing(start, chunks, 11))

    cycles = [cycle(0, 0.0, 0.01), cycle(1, 0.0, 0.05), cycle(0, 0.2, 0.01)]
    figures = cycle_figures(cycles, cycles)
    assert figures["itl_token_mean_ms"] == pytest.approx((10 * 10 + 10 * 50 + 10 * 10) / 30)
    assert figures["tail_ms"] == pytest.approx([10.0, 10.0, 10.0])
    # only client 0's first generation has a next one of the same client: sent 0.2 - 0.13 s later
    assert figures["turnaround_ms"] == pytest.approx([70.0])


def test_closed_loop_reports_each_cycle_and_the_window_meter() -> None:
    async def meter() -> Callable[[], Awaitable[dict[str, float]]]:
        async def stop() -> dict[str, float]:
            return {"others_share": 0.0}
        return stop

    served = asyncio.run(closed_loop(PacedChat(chunks=5), 2, warmup_s=0.1, duration_s=0.4,  # type: ignore[arg-type]
                                     meter=meter))
    assert served["others_share"] == 0.0
    assert served["itl_token_mean_ms"] == pytest.approx(CHUNK_GAP_S * 1000.0, rel=0.5)
    assert len(served["tail_ms"]) == served["generations"]
    assert all(0.0 <= t < 5.0 for t in served["tail_ms"])


def test_streaming_spans_count_who_decoded_alongside_and_whose_prefill_fell_inside() -> None:
    # A streams 0.1-1.1 s; B streams 0.6-1.6 s (half of A's span); C's first chunk at 0.9 s.
    a = Cycle(0, 0.0, [0.1, 0.6, 1.1], ended=1.2, timing=timing(0.0, [0.1, 0.6, 1.1], 3))
    b = Cycle(1, 0.5, [0.6, 1.6], ended=1.7)
    c = Cycle(2, 0.8, [0.9, 1.0], ended=1.05)
    rows = streaming_spans([a, b, c], [a])
    assert rows == [pytest.approx([1.0, 2.0, 1.0 + 0.5 + 0.1, 2.0])]


def test_the_engine_window_reads_busy_share_step_time_and_batch_from_the_counters() -> None:
    grown = {**dict.fromkeys(ENGINE_COUNTERS, 0.0),
             "steps": 200.0, "step_s": 6.0, "prefill_tokens": 500.0, "decode_tokens": 2400.0,
             "attention_positions": 300000.0}
    figures = engine_window(grown, 10.0)
    assert tuple(figures) == ENGINE_WINDOW_KEYS
    assert figures == {"engine_busy_share": 0.6, "engine_steps_per_s": 20.0, "engine_step_ms": 30.0,
                       "engine_prefill_tokens_per_step": 2.5, "engine_decode_tokens_per_step": 12.0,
                       "engine_attention_positions_per_step": 1500.0}
    idle = engine_window(dict.fromkeys(grown, 0.0), 10.0)
    assert idle["engine_busy_share"] == 0.0 and idle["engine_step_ms"] == 0.0
