"""CPU time of a process and its descendants, from /proc (Linux), and pinning them to CPUs.

On a shared, noisy 2-core host the CPU a component spends per request is steadier than its
throughput: ``CpuMeter(pid).seconds()`` is the user+system time so far of ``pid`` and every
process below it (Triton's python-backend stubs are children of tritonserver).
``component_seconds(gateway_pid, triton_pid)`` reads the gateway's, Triton's (with its stubs), one
named model's stub's and this load generator's own CPU seconds at once.
``pin_tree(pid, cpus)`` sets the CPU affinity of every thread of ``pid`` and (unless told not
to) its descendants (threads they start later inherit it), and ``renice_tree(pid, nice)`` their nice value, to
emulate components on hosts of their own. ``EngineIsolation`` gives one model's engine a core of its
own (its python-backend stub on the last CPU, everything else of the stack and the bench on the
others) for measurements that must not depend on how the host interleaves the engine's threads
with the gateway's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float]]:
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None:
                stats[int(entry.name)] = found
    return stats


def _tree(pid: int, stats: dict[int, tuple[int, float]]) -> list[int]:
    """``pid`` and its living descendants."""
    found, frontier, seen = [], [pid], set()
    while frontier:
        current = frontier.pop()
        if current in seen or current not in stats:
            continue
        seen.add(current)
        found.append(current)
        frontier.extend(child for child, (parent, _) in stats.items() if parent == current)
    return found


def _each_thread(pid: int, apply: Callable[[int], None], descendants: bool = True) -> int:
    """Call ``apply(tid)`` for every thread of ``pid`` and (unless told not to) its descendants;
    return how many."""
    done = 0
    for process in _tree(pid, _processes()) if descendants else [pid]:
        for task in Path(f"/proc/{process}/task").iterdir():
            try:
                apply(int(task.name))
                done += 1
            except (ProcessLookupError, PermissionError):
                continue
    return done


def pin_tree(pid: int, cpus: set[int], descendants: bool = True) -> int:
    """Pin every thread of ``pid`` and (unless told not to) its descendants to ``cpus``; return
    the threads pinned."""
    return _each_thread(pid, lambda tid: os.sched_setaffinity(tid, cpus), descendants)


def renice_tree(pid: int, nice: int) -> int:
    """Set the nice value of every thread of ``pid`` and its descendants (Linux niceness is per
    thread; threads started later inherit their creator's); return the threads changed."""
    return _each_thread(pid, lambda tid: os.setpriority(os.PRIO_PROCESS, tid, nice))


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


class CpuMeter:
    def __init__(self, pid: int, descendants: bool = True) -> None:
        self.pid = pid
        self.descendants = descendants

    def seconds(self) -> float:
        """CPU seconds used so far by ``pid`` and (unless told not to) its living descendants."""
        if not self.descendants:
            found = _stat(self.pid)
            return found[1] if found is not None else 0.0
        return trees_seconds([self.pid])


def trees_seconds(pids: Iterable[int]) -> float:
    """CPU seconds used so far by ``pids`` and their living descendants, each process counted once."""
    stats = _processes()
    members: set[int] = set()
    for pid in pids:
        members.update(_tree(pid, stats))
    return sum(stats[pid][1] for pid in members)


def model_stub_pid(triton_pid: int, model: str) -> int | None:
    """The python-backend stub of ``model`` under ``triton_pid`` (its first argument is
    ``<repository>/<model>/<version>/model.py``), or None."""
    stats = _processes()
    for pid in _tree(triton_pid, stats):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if "triton_python_backend_stub" in argv[0].decode(errors="replace") and len(argv) > 1 \
                and Path(argv[1].decode(errors="replace")).parent.parent.name == model:
            return pid
    return None


def component_seconds(gateway_pid: int | None, triton_pid: int | None, model: str | None = None) -> dict[str, float]:
    """CPU seconds so far of the gateway, of the Triton worker (with its stubs), of ``model``'s stub
    alone (when given and found), each if known, and of this load generator's own process (not the
    stack it started; the control plane's threads, which run in it, are counted with it)."""
    pids = {"gateway": gateway_pid, "triton": triton_pid}
    seconds = {name: CpuMeter(pid).seconds() for name, pid in pids.items() if pid is not None}
    if model is not None and triton_pid is not None:
        stub = model_stub_pid(triton_pid, model)
        if stub is not None:
            seconds[f"{model}_stub"] = CpuMeter(stub, descendants=False).seconds()
    return {**seconds, "load_generator": CpuMeter(os.getpid(), descendants=False).seconds()}


@dataclass(frozen=True)
class EngineIsolation:
    """The chat engine alone on ``engine_cpus`` with ``threads`` llama.cpp threads; the rest of the
    stack (tritonserver, the other models' stubs, the gateway) and the bench on ``other_cpus``."""

    engine_cpus: frozenset[int]
    other_cpus: frozenset[int]
    threads: int = 1
    model: str = "chat"

    @classmethod
    def last_cpu(cls, threads: int = 1) -> EngineIsolation:
        """The engine on the last CPU this process may use, the rest on the others."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            raise ValueError("engine isolation needs at least 2 CPUs")
        return cls(frozenset(cpus[-1:]), frozenset(cpus[:-1]), threads)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "engine_cpus": sorted(self.engine_cpus),
                "other_cpus": sorted(self.other_cpus), "threads": self.threads}

    def pin_stack(self, triton_pid: int, gateway_pid: int | None) -> dict[str, int]:
        """Pin a started stack and this process's own threads; return the threads pinned per part.
        Raise ``RuntimeError`` when the engine's stub is not found under ``triton_pid``."""
        stub = model_stub_pid(triton_pid, self.model)
        if stub is None:
            raise RuntimeError(f"no python-backend stub of {self.model!r} under tritonserver {triton_pid}")
        pinned = {"triton": pin_tree(triton_pid, set(self.other_cpus)),
                  "engine": pin_tree(stub, set(self.engine_cpus), descendants=False),
                  "bench": pin_tree(os.getpid(), set(self.other_cpus), descendants=False)}
        if gateway_pid is not None:
            pinned["gateway"] = pin_tree(gateway_pid, set(self.other_cpus))
        return pinned

    def engine_args(self) -> list[str]:
        """``bench.ceiling``'s options for an engine measured as this isolation serves it."""
        return ["--threads", str(self.threads), "--cpus", ",".join(map(str, sorted(self.engine_cpus)))]

    def pin_this_process(self) -> int:
        """Pin this process's threads to the engine's CPUs (an engine measured in-process)."""
        return pin_tree(os.getpid(), set(self.engine_cpus), descendants=False)


def isolation_entry(isolation: EngineIsolation | None) -> dict[str, Any]:
    """What a bench writes into its record: ``{"isolation": ...}``, or nothing for shared cores."""
    return {"isolation": isolation.to_json()} if isolation is not None else {}


def check_same_isolation(what: str, first: dict[str, Any], second: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless two bench records were measured with the same engine isolation
    (their ``isolation_entry``; a profile of a 1-thread engine on its own core does not describe
    a 2-thread one on shared cores)."""
    if first.get("isolation") != second.get("isolation"):
        raise ValueError(f"{what}: measured with different engine isolation "
                         f"({first.get('isolation')} vs {second.get('isolation')})")
