"""The chat engine's threads against the cores: one or two engines at once, with or without a busy loop.

``python -m bench studies.engine_threads [ROUNDS]`` (default 2; about 5 minutes a round) runs the
engine ceiling (``bench ceiling --streams 4 --max-tokens 32``, no Triton, in a process of its
own) with 2 or 1 llama.cpp threads, one engine alone or two started together (0.5 s apart), with
OpenMP's default wait policy, ``OMP_WAIT_POLICY=PASSIVE`` or ``GOMP_SPINCOUNT=1000``; then the same
while a busy loop holds one core. It prints one line per case and round,
``round R | case | ceiling JSON`` (one JSON per engine, its completion tokens and wall time left
out), for ``docs/benchmarks.md``, "Settings chosen by measurement" (the rows "two versions of chat
on the same cores" and "OpenMP wait policy left at its default"). It holds the integration lock
(``/tmp/shunter-integration.lock``) throughout.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated

import typer

from settings.paths import PROJECT_ROOT

app = typer.Typer(add_completion=False)
LOCK = "/tmp/shunter-integration.lock"
CEILING_ARGS = ("--streams", "4", "--max-tokens", "32")
CEILING_TIMEOUT_S = 400.0
SECOND_ENGINE_DELAY_S = 0.5
BUSY_LOOP = ("timeout", "600", "bash", "-c", "while :; do :; done")
_LEFT_OUT = re.compile(r'"completion_tokens": [0-9]*, |"wall_s": [0-9.]*, ')


@dataclass(frozen=True)
class Case:
    """``engines`` ceilings at once with these extra environment variables and ceiling arguments."""

    label: str
    engines: int = 1
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()


ONE_THREAD = ("--threads", "1")
PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}
SPIN_1000 = {"GOMP_SPINCOUNT": "1000"}
CASES = (
    Case("1 engine, 2 threads"),
    Case("1 engine, 1 thread", args=ONE_THREAD),
    Case("1 engine, 2 threads, OMP_WAIT_POLICY=PASSIVE", env=PASSIVE),
    Case("1 engine, 2 threads, GOMP_SPINCOUNT=1000", env=SPIN_1000),
    Case("2 engines, 2 threads", 2),
    Case("2 engines, 1 thread", 2, args=ONE_THREAD),
)
BUSY_CASES = (*CASES, Case("2 engines, 2 threads, OMP_WAIT_POLICY=PASSIVE", 2, env=PASSIVE))


def _result_line(process: subprocess.Popen[str], deadline: float) -> str:
    """The ceiling's last output line without its token count and wall time ("" if it timed out)."""
    try:
        out, _ = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return ""
    lines = out.strip().splitlines()
    return _LEFT_OUT.sub("", lines[-1]) if lines else ""


def run_case(case: Case) -> str:
    """The ceilings' result lines, joined by a space."""
    started: list[tuple[subprocess.Popen[str], float]] = []
    for index in range(case.engines):
        if index:
            time.sleep(SECOND_ENGINE_DELAY_S)
        process = subprocess.Popen([sys.executable, "-m", "bench", "ceiling", *CEILING_ARGS, *case.args],
                                   cwd=PROJECT_ROOT, env={**os.environ, **case.env}, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        started.append((process, time.monotonic() + CEILING_TIMEOUT_S))
    return " ".join(_result_line(process, deadline) for process, deadline in started)


@contextlib.contextmanager
def busy_loop() -> Iterator[None]:
    """A shell busy loop holding one core (at most 10 minutes) while inside."""
    hog = subprocess.Popen(BUSY_LOOP)
    try:
        yield
    finally:
        hog.terminate()  # timeout passes it on to the loop
        hog.wait()


@app.command()
def main(rounds: Annotated[int, typer.Argument(min=1, help="Rounds of every case.")] = 2) -> None:
    """See the module docstring."""
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for round_number in range(1, rounds + 1):
            for case in CASES:
                print(f"round {round_number} | {case.label} | {run_case(case)}", flush=True)
            with busy_loop():
                for case in BUSY_CASES:
                    print(f"round {round_number} | busy loop, {case.label} | {run_case(case)}", flush=True)
