"""The sender thread: submission order, draining on close, a failing send does not stop it."""

from __future__ import annotations

import threading

from python_backends.chat.send_queue import SendQueue


def test_sends_run_in_submission_order_off_the_calling_thread() -> None:
    sends = SendQueue()
    seen: list[tuple[int, str]] = []
    for i in range(200):
        sends.submit(lambda i=i: seen.append((i, threading.current_thread().name)))
    assert sends.close(timeout_s=5)
    assert [i for i, _ in seen] == list(range(200))
    assert {name for _, name in seen} == {"chat-sender"}


def test_a_failing_send_is_logged_and_the_next_ones_still_run() -> None:
    sends = SendQueue()
    seen: list[int] = []

    def broken() -> None:
        raise RuntimeError("the client went away")

    sends.submit(broken)
    sends.submit(lambda: seen.append(1))
    assert sends.close(timeout_s=5)
    assert seen == [1]
