"""Tokenising off the event loop: long inputs on the offload threads, short ones inline."""

from __future__ import annotations

import threading

from gateway.tokenization import Offload


async def test_long_inputs_run_on_a_thread_of_their_own_and_short_ones_inline() -> None:
    offload = Offload(threads=1, inline_chars=100)
    loop_thread = threading.get_ident()
    try:
        assert await offload.run(10, threading.get_ident) == loop_thread
        assert await offload.run(101, threading.get_ident) != loop_thread
        assert await offload.run(5000, lambda a, b: a + b, 2, 3) == 5
    finally:
        offload.close()
