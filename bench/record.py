"""What a benchmark records of its own run: the command as typed, the machine, progress on stderr.

``command_line()`` is the running command (``python -m bench NAME <arguments>``), written into
every report; ``machine_facts()`` what a report states about the host; ``log(message)`` one
timestamped progress line on stderr (reports go to stdout and files); ``int_list("1,4,16")`` reads a
comma-separated count option.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time
from typing import Any


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def command_line() -> str:
    """The command that is running, as typed (``python -m bench <arguments>``)."""
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else sys.executable
    main = sys.modules.get("__main__")
    module = getattr(getattr(main, "__spec__", None), "name", None) or "bench"
    return shlex.join([python, "-m", module.removesuffix(".__main__"), *sys.argv[1:]])


def _proc_field(path: str, key: str) -> str | None:
    """The value of the first ``key: value`` line of a /proc file, or None."""
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_facts() -> dict[str, Any]:
    """CPUs usable by this process (what ``nproc`` prints), the CPU model and memory."""
    model = _proc_field("/proc/cpuinfo", "model name") or "unknown"
    memory_kb = int((_proc_field("/proc/meminfo", "MemTotal") or "0 kB").split()[0])
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_model": model,
            "memory_gib": round(memory_kb / 2**20, 1), "kernel": platform.release(),
            "python": platform.python_version(), "loadavg": [round(v, 2) for v in os.getloadavg()]}


def int_list(text: str) -> list[int]:
    """The integers of a comma-separated option (``"1,4,16"``); empty parts are skipped."""
    return [int(part) for part in text.split(",") if part.strip()]
