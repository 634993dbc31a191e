"""How much CPU other processes took while a measurement ran (this machine is shared).

``CpuWatch(own_pids)`` reads the machine's busy CPU time (``/proc/stat``) and the CPU time of the
given processes and their living descendants (``bench.cpu.trees_seconds``) when it starts and
when ``stop()`` is called, and returns ``others_cpu_s`` (busy time not spent by them), the wall
time and ``others_share`` (others' CPU seconds per second of wall time per core). Why it matters:
llama.cpp's two threads synchronise at every operation, so one busy process on either core slows
an engine step by up to 10 x (measured: 63-token prefill steps 0.19 s alone, 1.2-2.6 s while
another job ran, even at nice 19).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from bench.cpu import trees_seconds

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def busy_cpu_s() -> float:
    """CPU seconds the machine spent busy since boot (all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS_PER_S


class CpuWatch:
    def __init__(self, own_pids: Iterable[int]) -> None:
        self.own_pids = [os.getpid(), *own_pids]
        self._start = (time.monotonic(), busy_cpu_s(), trees_seconds(self.own_pids))

    def stop(self) -> dict[str, float]:
        """Others' CPU seconds and share of the cores since the watch started."""
        wall, busy, own = time.monotonic(), busy_cpu_s(), trees_seconds(self.own_pids)
        wall_s = wall - self._start[0]
        others = max(0.0, (busy - self._start[1]) - (own - self._start[2]))
        cores = os.cpu_count() or 1
        return {"wall_s": wall_s, "others_cpu_s": others, "others_share": others / max(wall_s * cores, 1e-9)}


def wait_for_quiet(max_wait_s: float, window_s: float = 3.0, max_others_share: float = 0.1,
                   log: object = print) -> dict[str, float]:
    """Wait until other processes take at most ``max_others_share`` of the cores over one
    ``window_s`` window, for at most ``max_wait_s``; return the last window's figures and the wait."""
    started = time.monotonic()
    while True:
        watch = CpuWatch([])
        time.sleep(window_s)
        seen = watch.stop()
        waited = time.monotonic() - started
        if seen["others_share"] <= max_others_share or waited >= max_wait_s:
            return {**seen, "waited_s": waited}
        if callable(log):
            log(f"other processes use {seen['others_share']:.0%} of the cores; waiting ({waited:.0f} s)")


class ContentionTimeline:
    """Others' share of the cores in successive ``interval_s`` windows, sampled on a thread
    from ``start()`` to ``stop()`` (which returns ``[[seconds from start, share], ...]``)."""

    def __init__(self, own_pids: Iterable[int], interval_s: float = 2.0) -> None:
        import threading

        self.own_pids = list(own_pids)
        self.interval_s = interval_s
        self.points: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="contention", daemon=True)

    def start(self) -> ContentionTimeline:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            watch = CpuWatch(self.own_pids)
            self._stop.wait(self.interval_s)
            share = watch.stop()["others_share"]
            self.points.append([round(time.monotonic() - self._started, 2), round(share, 3)])

    def stop(self) -> list[list[float]]:
        self._stop.set()
        self._thread.join(self.interval_s + 1.0)
        return self.points
