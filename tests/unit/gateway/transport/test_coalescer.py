"""RowCoalescer with an in-process stand-in for Triton (a unit test of the batching logic)."""

import asyncio

import numpy as np
import pytest

from gateway.transport.triton.coalescer import Columns, RowCoalescer


class DoublingModel:
    """Returns 2*x per row after ``delay_s``; records each call's rows and priority."""

    def __init__(self, delay_s: float = 0.01, fail_on: int | None = None) -> None:
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.calls: list[tuple[int, int]] = []
        self.in_flight = 0
        self.peak_in_flight = 0

    async def __call__(self, columns: Columns, priority: int, request_id: str) -> Columns:
        self.calls.append((len(columns["x"]), priority))
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        if self.fail_on is not None and self.fail_on in columns["x"]:
            raise RuntimeError("model failed")
        return {"y": columns["x"] * 2}


def _rows(*values: int) -> Columns:
    return {"x": np.array(values, dtype=np.int64).reshape(-1, 1)}


async def test_requests_arriving_during_a_call_share_the_next_call_and_get_their_own_rows() -> None:
    model = DoublingModel()
    coalescer = RowCoalescer(model, max_batch_rows=64, max_in_flight=1)
    results = await asyncio.gather(*(coalescer.submit(_rows(i, i + 100), priority=2, request_id=f"r{i}")
                                     for i in range(10)))
    for i, result in enumerate(results):
        assert result["y"].ravel().tolist() == [2 * i, 2 * (i + 100)]
    assert [rows for rows, _ in model.calls] == [2, 18]  # the first goes alone, the rest together


async def test_batches_respect_the_row_limit_and_run_at_the_most_urgent_priority() -> None:
    model = DoublingModel()
    coalescer = RowCoalescer(model, max_batch_rows=4, max_in_flight=1)
    await asyncio.gather(coalescer.submit(_rows(0), 3, "a"), coalescer.submit(_rows(1, 2), 3, "b"),
                         coalescer.submit(_rows(3, 4), 1, "c"), coalescer.submit(_rows(5), 2, "d"))
    assert model.calls == [(1, 3), (4, 1), (1, 2)]


async def test_a_failed_call_fails_its_requests_only() -> None:
    model = DoublingModel(fail_on=7)
    coalescer = RowCoalescer(model, max_batch_rows=64, max_in_flight=1)
    first = asyncio.ensure_future(coalescer.submit(_rows(1), 2, "a"))
    await asyncio.sleep(0)
    bad = asyncio.ensure_future(coalescer.submit(_rows(7), 2, "b"))
    later_in_same_call = asyncio.ensure_future(coalescer.submit(_rows(8), 2, "c"))
    assert (await first)["y"].ravel().tolist() == [2]
    with pytest.raises(RuntimeError):
        await bad
    with pytest.raises(RuntimeError):
        await later_in_same_call
    assert (await coalescer.submit(_rows(9), 2, "d"))["y"].ravel().tolist() == [18]


async def test_a_caller_that_gives_up_is_not_sent() -> None:
    model = DoublingModel(delay_s=0.05)
    coalescer = RowCoalescer(model, max_batch_rows=64, max_in_flight=1)
    busy = asyncio.ensure_future(coalescer.submit(_rows(1), 2, "a"))
    await asyncio.sleep(0)
    gone = asyncio.ensure_future(coalescer.submit(_rows(2, 3, 4), 2, "b"))
    await asyncio.sleep(0)
    gone.cancel()
    stays = await coalescer.submit(_rows(5), 2, "c")
    await busy
    assert stays["y"].ravel().tolist() == [10]
    assert [rows for rows, _ in model.calls] == [1, 1]


async def test_calls_in_flight_are_bounded() -> None:
    model = DoublingModel(delay_s=0.02)
    coalescer = RowCoalescer(model, max_batch_rows=1, max_in_flight=2)
    await asyncio.gather(*(coalescer.submit(_rows(i), 2, str(i)) for i in range(6)))
    assert model.peak_in_flight == 2
