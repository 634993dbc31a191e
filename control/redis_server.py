"""A local ``redis-server`` for the gateways' shared state store, when ``gateway.yaml`` names a
loopback ``redis://`` URL and ``start_redis`` is on and nothing answers there yet.

``LocalRedis.start()`` runs ``redis-server`` on that port (no persistence: the store holds only
state with a TTL), waits (bounded) until it answers ``PING``, and ``stop()`` ends that process
(only the one it started). ``answers(port)`` is the ``PING`` probe.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from control.errors import ControlError

PING_TIMEOUT_S = 0.5


class RedisStartError(ControlError, RuntimeError):
    """``redis-server`` is missing or did not answer in time; the message says where its log is."""


def answers(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a Redis server answers ``PING`` on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=PING_TIMEOUT_S) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class LocalRedis:
    def __init__(self, port: int, state_dir: Path, ready_timeout_s: float = 10.0) -> None:
        self.port = port
        self.state_dir = state_dir
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.state_dir / "logs" / "redis.log"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisStartError("redis-server is not installed (scripts/setup.sh installs it)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.state_dir)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RedisStartError(f"redis-server exited on port {self.port}; see {self.log_path}")
            if answers(self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise RedisStartError(f"redis-server did not answer on port {self.port} within "
                              f"{self.ready_timeout_s:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
