"""CLI start-up: wall time of ``shunter --help`` and of ``shunter rollout status`` to an unreachable control.

Each command runs ``--runs`` times in a fresh interpreter (this venv's python, ``-m cli.main``),
alternating between this tree and, with ``--baseline DIR``, another checkout (e.g. a worktree of
an older commit) put first on ``PYTHONPATH``, so that both are measured side by side under the
same load. Prints the median and the range per command and tree, and the load average.
Target (issue 27): ≤ 0.3 s for both.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parent.parent
app = typer.Typer(add_completion=False)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _run_s(tree: Path, args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60, check=False)
    return time.perf_counter() - started


@app.command()
def main(runs: Annotated[int, typer.Option(min=1, max=50)] = 5,
         baseline: Annotated[Path | None, typer.Option(help="another checkout to measure beside this one")] = None
         ) -> None:
    commands = {"--help": ["--help"],
                "rollout status": ["rollout", "status", "embed", "--control-url", f"http://127.0.0.1:{_closed_port()}"]}
    trees = {"this tree": ROOT, **({"baseline": baseline.resolve()} if baseline else {})}
    times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in commands}
    for _ in range(runs):
        for command, args in commands.items():
            for tree_name, tree in trees.items():
                times[tree_name, command].append(_run_s(tree, args))
    print(f"load average {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores, {runs} runs each")
    for (tree_name, command), seconds in times.items():
        print(f"{tree_name:10} shunter {command:15} median {statistics.median(seconds):.3f} s "
              f"(range {min(seconds):.3f}-{max(seconds):.3f})")


if __name__ == "__main__":
    app()
