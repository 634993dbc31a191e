"""An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a thread, for CLI tests that call
it over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class ServedApp:
    """``app`` listening on ``url`` until ``close()``; ready when the constructor returns (10 s bound)."""

    def __init__(self, app: Any) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
