"""What ``bench.continuous.closed_loop`` counts: every text chunk that arrives in the window."""

import asyncio
import time

from bench.chat import StreamTiming, timing
from bench.continuous import closed_loop

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
