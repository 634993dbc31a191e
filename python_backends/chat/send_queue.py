"""One background thread that runs the chat model's round trips to the Triton server (response
sends, cancellation checks, metric updates), in submission order.

Each of the python backend's ``response_sender.send``, ``request.is_cancelled`` and metric
updates is an IPC round trip to the Triton server. Done on the engine thread, a step of 16
sequences waits for 16 sends before the next ``llama_decode``; with ``SendQueue`` the engine
thread only enqueues, and the round trips overlap the next model step (ctypes releases the GIL
during ``llama_decode``). One thread keeps every request's responses in order, its final
response last. A send that raises is logged and does not stop the others.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class SendQueue:
    def __init__(self, name: str = "chat-sender") -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, send: Callable[[], None]) -> None:
        """Run ``send`` after everything submitted before it."""
        self._queue.put(send)

    def close(self, timeout_s: float) -> bool:
        """Run what is queued, then stop; False if the thread did not finish within ``timeout_s``."""
        self._queue.put(None)
        self._thread.join(timeout=timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            send = self._queue.get()
            if send is None:
                return
            try:
                send()
            except Exception:  # one failed send must not stop every other request's responses
                log.exception("sending a response failed")
