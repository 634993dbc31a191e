"""Health, readiness, metrics, the CLI's status, and the supervisor restarting a dead worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from control.stack import load_config
from control.supervisor import Supervisor
from control.triton_runtime import resolve_runtime
from tests.integration.conftest import CONTROL_PORT, RunningStack, make_paths
from tests.integration.ports import port

pytestmark = pytest.mark.integration


def test_health_and_readiness(stack: RunningStack) -> None:
    assert httpx.get(f"{stack.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{stack.url}/readyz")
    assert ready.status_code == 200
    assert ready.json()["models"] == dict.fromkeys(["chat", "embed", "rerank", "vision", "tabular"], True)
    assert httpx.get(f"{stack.url}/v2/health/ready").status_code == 200


def test_metrics_count_requests_by_outcome(stack: RunningStack) -> None:
    with stack.client() as client:
        client.post("/v1/embeddings", json={"model": "embed", "input": "count me"})
        client.post("/v1/embeddings", json={"model": "nope", "input": "x"})
    text = httpx.get(f"{stack.url}/metrics").text
    assert 'shunter_requests_total{model="embed",outcome="completed",route="/v1/embeddings"}' in text
    assert 'outcome="rejected(model_not_found)"' in text
    assert 'shunter_worker_model_ready{model="chat",worker="local-cpu-0"} 1.0' in text
    assert "demo-premium-key" not in text


def test_cli_status_shows_workers_and_ready_models(stack: RunningStack) -> None:
    shunter = Path(sys.executable).parent / "shunter"
    result = subprocess.run([str(shunter), "status", "--state-dir", str(stack.paths.state_dir),
                             "--control-url", f"http://127.0.0.1:{CONTROL_PORT}"],
                            capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "250"})
    assert result.returncode == 0, result.stderr
    assert "local-cpu-0" in result.stdout and "tabular:READY" in result.stdout


def test_supervisor_restarts_a_worker_that_dies(tmp_path: Path, artifacts_dir: Path) -> None:
    from control.stack import prepare

    paths = make_paths(tmp_path, base_port=port(28300), models=("tabular",))
    prepare(paths, log=lambda _: None)
    config = load_config(paths)
    supervisor = Supervisor(config, resolve_runtime(config.triton, paths.state_dir), paths.repository, paths.logs)
    supervisor.start()
    try:
        worker = supervisor.workers[0]
        assert worker.process is not None
        first_pid = worker.process.pid
        os.kill(first_pid, signal.SIGKILL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if worker.restarts == 1 and worker.alive() and worker.process.pid != first_pid:
                break
            time.sleep(0.2)
        assert worker.restarts == 1 and worker.process.pid != first_pid
        worker.wait_ready(60)
    finally:
        supervisor.stop()
    assert not worker.alive()
    assert not list(Path("/dev/shm").glob(f"{worker.shm_prefix}*"))
