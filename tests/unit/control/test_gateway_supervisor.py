"""The gateway supervisor on real child processes: a killed gateway is started again after its
backoff, the others keep running, and repeated crashes stop the restarts with a reason."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

from control.gateway_supervisor import GatewaySupervisor, RestartPolicy

FAST = RestartPolicy(base_s=0.05, max_s=0.2, max_crashes=3, window_s=30.0)


def _sleeper(index: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=5)


def test_the_backoff_doubles_and_repeated_crashes_stop_the_restarts() -> None:
    policy = RestartPolicy(base_s=0.5, max_s=8.0, max_crashes=5, window_s=60.0)
    assert [policy.delay_s([0.0] * n, now=1.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert policy.delay_s([0.0] * 5, now=1.0) is None
    assert policy.delay_s([0.0] * 5, now=100.0) == 0.5  # old crashes are forgotten


def test_a_killed_gateway_is_restarted_and_the_others_keep_running() -> None:
    messages: list[str] = []
    supervisor = GatewaySupervisor(_sleeper, 2, FAST, log=messages.append)
    supervisor.start()
    try:
        first, second = supervisor.processes
        first.send_signal(signal.SIGKILL)
        assert _until(lambda: supervisor.restarts() == [1, 0])
        assert supervisor.processes[0].pid != first.pid and supervisor.processes[0].poll() is None
        assert supervisor.processes[1] is second and second.poll() is None
        assert supervisor.gave_up is None
        assert any("restarted" in m for m in messages)
    finally:
        supervisor.stop(_stop)
    assert all(p.poll() is not None for p in supervisor.processes)


def test_a_gateway_that_keeps_crashing_is_left_down_with_a_clear_reason() -> None:
    def crasher(index: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])

    supervisor = GatewaySupervisor(crasher, 1, FAST, log=lambda _: None)
    supervisor.start()
    try:
        assert _until(lambda: supervisor.gave_up is not None)
        assert supervisor.gave_up == "gateway 0 exited 3 times within 30 s (last exit code 3); not restarting it"
        assert supervisor.restarts() == [2]
    finally:
        supervisor.stop(_stop)
