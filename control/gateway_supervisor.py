"""The local stack's gateway processes, restarted when one dies.

``GatewaySupervisor(start, count)`` starts gateway ``i`` with ``start(i)`` (which returns once that
gateway answers ``/readyz``) and watches each one in a thread of its own. A gateway that exits
while the stack is not stopping is started again after a backoff (``RestartPolicy``: 0.5 s,
doubling up to 8 s, by the crashes in the last minute); after ``max_crashes`` crashes within
``window_s`` it is left down, and ``gave_up`` names it with the reason (the CLI prints it and
stops the stack). While one gateway restarts, the others (``shunter up --gateways N``, one port
shared with ``SO_REUSEPORT``) keep serving: the kernel sends new connections only to a listening
socket.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

StartGateway = Callable[[int], subprocess.Popen[bytes]]


@dataclass(frozen=True)
class RestartPolicy:
    """When to restart a crashed process: ``delay_s(crash_times, now)`` is the backoff before the
    next start, or None to stop restarting (``max_crashes`` crashes within ``window_s``)."""

    base_s: float = 0.5
    max_s: float = 8.0
    max_crashes: int = 5
    window_s: float = 60.0

    def delay_s(self, crash_times_s: list[float], now: float) -> float | None:
        recent = [t for t in crash_times_s if now - t <= self.window_s]
        if len(recent) >= self.max_crashes:
            return None
        return min(self.max_s, self.base_s * 2 ** max(0, len(recent) - 1))


@dataclass
class _Watched:
    index: int
    process: subprocess.Popen[bytes]
    crashes_s: list[float] = field(default_factory=list)
    restarts: int = 0


class GatewaySupervisor:
    """See the module docstring; ``processes`` are the gateways now (restarted ones replace their
    predecessor at the same index)."""

    def __init__(self, start: StartGateway, count: int, policy: RestartPolicy | None = None,
                 log: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic) -> None:
        self._start = start
        self._count = count
        self.policy = policy or RestartPolicy()
        self._log = log
        self._clock = clock
        self._watched: list[_Watched] = []
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.gave_up: str | None = None

    @property
    def processes(self) -> list[subprocess.Popen[bytes]]:
        return [w.process for w in self._watched]

    def restarts(self) -> list[int]:
        return [w.restarts for w in self._watched]

    def start(self) -> None:
        """Start every gateway, one after another (each ready before the next), then watch them."""
        for index in range(self._count):
            self._watched.append(_Watched(index, self._start(index)))
        for watched in self._watched:
            thread = threading.Thread(target=self._watch, args=(watched,), name=f"gateway-{watched.index}-monitor",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def _watch(self, watched: _Watched) -> None:
        while not self._stopping.is_set():
            try:
                code = watched.process.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                continue
            if self._stopping.is_set():
                return
            now = self._clock()
            watched.crashes_s.append(now)
            delay_s = self.policy.delay_s(watched.crashes_s, now)
            if delay_s is None:
                self.gave_up = (f"gateway {watched.index} exited {self.policy.max_crashes} times within "
                                f"{self.policy.window_s:.0f} s (last exit code {code}); not restarting it")
                self._log(self.gave_up)
                return
            self._log(f"gateway {watched.index} exited with code {code}; restarting in {delay_s:.1f} s")
            if self._stopping.wait(delay_s) or not self._restart(watched):
                return

    def _restart(self, watched: _Watched) -> bool:
        """Start the gateway again; a start that fails counts as one more crash (False: stopping)."""
        while not self._stopping.is_set():
            try:
                watched.process = self._start(watched.index)
            except Exception as exc:  # a failed start is a crash; the policy bounds the retries
                now = self._clock()
                watched.crashes_s.append(now)
                delay_s = self.policy.delay_s(watched.crashes_s, now)
                if delay_s is None:
                    self.gave_up = f"gateway {watched.index} could not be restarted: {exc}"
                    self._log(self.gave_up)
                    return False
                if self._stopping.wait(delay_s):
                    return False
                continue
            watched.restarts += 1
            self._log(f"gateway {watched.index} restarted (pid {watched.process.pid})")
            return True
        return False

    def stop(self, stop_process: Callable[[subprocess.Popen[bytes]], None]) -> None:
        """Stop watching, then stop every gateway with ``stop_process``."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=70)
        for watched in self._watched:
            stop_process(watched.process)
