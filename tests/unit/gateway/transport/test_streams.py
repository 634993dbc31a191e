"""The bookkeeping of reusable generation streams; that Triton serves generations one after
another on a reused stream is proven on the real stack (tests/integration/test_streams_and_cancellation.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateway.transport.triton.streams import GenerationStreams


class _Call:
    """What ``stream_infer`` returns, as far as the pool uses it: an async iterator with ``cancel``."""

    def __init__(self) -> None:
        self.cancelled = False

    def __aiter__(self) -> _Call:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _Client:
    def __init__(self) -> None:
        self.calls: list[_Call] = []

    def stream_infer(self, requests: AsyncIterator[dict[str, Any]]) -> _Call:
        self.calls.append(_Call())
        return self.calls[-1]


class _Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def _pool(max_idle: int = 4, max_idle_s: float = 60.0) -> tuple[GenerationStreams, _Client, _Clock]:
    client, clock = _Client(), _Clock()
    return GenerationStreams(client, max_idle=max_idle, max_idle_s=max_idle_s, clock=clock), client, clock  # type: ignore[arg-type]


def test_a_released_stream_carries_the_next_generation_and_a_discarded_one_is_closed() -> None:
    pool, client, _ = _pool()
    first = pool.acquire()
    assert not first.reused and pool.opened == 1
    pool.release(first)
    again = pool.acquire()
    assert again is first and again.reused and pool.opened == 1
    pool.discard(again)
    assert client.calls[0].cancelled
    assert pool.acquire() is not first and pool.opened == 2


def test_concurrent_generations_get_streams_of_their_own_and_the_latest_idle_is_reused_first() -> None:
    pool, _, _ = _pool()
    a, b = pool.acquire(), pool.acquire()
    assert a is not b and pool.opened == 2
    pool.release(a)
    pool.release(b)
    assert pool.idle == 2 and pool.acquire() is b


def test_idle_streams_are_bounded_in_number_and_age() -> None:
    pool, client, clock = _pool(max_idle=2, max_idle_s=10.0)
    streams = [pool.acquire() for _ in range(3)]
    for stream in streams:
        pool.release(stream)
    assert pool.idle == 2 and client.calls[2].cancelled  # the third found the pool full
    clock.now_s = 11.0
    fresh = pool.acquire()
    assert fresh not in streams and pool.idle == 0 and pool.opened == 4
    assert client.calls[0].cancelled and client.calls[1].cancelled


def test_fresh_skips_idle_streams_and_close_ends_them() -> None:
    pool, client, _ = _pool()
    idle = pool.acquire()
    pool.release(idle)
    assert pool.acquire(fresh=True) is not idle and pool.idle == 1
    pool.close()
    assert pool.idle == 0 and client.calls[0].cancelled
