"""CPU time of a process and its descendants, from /proc (Linux).

On a shared, noisy 2-core host the CPU a component spends per request is steadier than its
throughput: ``CpuMeter(pid).seconds()`` is the user+system time so far of ``pid`` and every
process below it (Triton's python-backend stubs are children of tritonserver).
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


class CpuMeter:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def seconds(self) -> float:
        """CPU seconds used so far by ``pid`` and its living descendants."""
        stats = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                found = _stat(int(entry.name))
                if found is not None:
                    stats[int(entry.name)] = found
        total, frontier = 0.0, [self.pid]
        seen = set()
        while frontier:
            pid = frontier.pop()
            if pid in seen or pid not in stats:
                continue
            seen.add(pid)
            total += stats[pid][1]
            frontier.extend(child for child, (parent, _) in stats.items() if parent == pid)
        return total
