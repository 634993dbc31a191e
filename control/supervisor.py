"""Local worker supervisor: runs the Triton servers of every configured pool on this host.

Each worker is one ``tritonserver`` process with explicit model control, loading at start the
models in its ``load_at_start`` (at first the models its pool serves). ``Supervisor.start()``
launches the initial workers and waits (bounded by ``ready_timeout_s``) until each reports every
model READY; a monitor thread restarts a worker that exits unexpectedly (after
``restart_backoff_s``), with the models it had loaded; ``stop()`` sends SIGTERM, waits for the
server's own exit timeout, kills it only as a last resort, and removes any python-backend
shared-memory regions the worker left under its unique prefix. The capacity controller adds
replicas (``add``) and removes drained ones (``remove``) while the supervisor runs
(``control/capacity/replicas.py``); the monitor watches the workers listed at each pass.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

from control.errors import ControlError
from control.triton_runtime import TritonRuntime
from settings.stack import StackConfig, TritonSettings
from settings.workers import WorkerAddress, worker_addresses

SHM_DIR = Path("/dev/shm")


class WorkerStartError(ControlError, RuntimeError):
    """A worker did not become ready in time; the message points at its log."""


class WorkerProcess:
    """One tritonserver process and its restarts."""

    def __init__(self, address: WorkerAddress, runtime: TritonRuntime, settings: TritonSettings,
                 repository: Path, log_dir: Path) -> None:
        self.address = address
        self._runtime = runtime
        self._settings = settings
        self._repository = repository
        self.log_path = log_dir / f"{address.name}.log"
        self.shm_prefix = f"shunter_{os.getpid()}_{address.name}_"
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        # What a (re)start loads; the capacity controller keeps it equal to the models loaded.
        self.load_at_start: tuple[str, ...] = address.models
        # How long Triton waits for in-flight requests on SIGTERM (replicas that drain wait longer).
        self.exit_timeout_s: int = settings.exit_timeout_s

    def command(self) -> list[str]:
        a = self.address
        args = [
            str(self._runtime.binary),
            f"--model-repository={self._repository}",
            "--model-control-mode=explicit",
            *[f"--load-model={m}" for m in self.load_at_start],
            f"--http-address={a.host}", f"--http-port={a.http_port}",
            f"--grpc-address={a.host}", f"--grpc-port={a.grpc_port}",
            f"--metrics-address={a.host}", f"--metrics-port={a.metrics_port}",
            "--disable-auto-complete-config",
            "--strict-readiness=true",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            "--log-verbose=0",
            *self._settings.extra_args,
        ]
        if self._runtime.backend_dir is not None:
            args.append(f"--backend-directory={self._runtime.backend_dir}")
        return args

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=self._runtime.env,
                start_new_session=True,
            )
        finally:
            log.close()

    def models_ready(self, client: httpx.Client) -> dict[str, bool]:
        """Readiness of each model this worker loads (False when unreachable)."""
        base = f"http://{self.address.host}:{self.address.http_port}"
        ready = {}
        for model in self.load_at_start:
            try:
                ready[model] = client.get(f"{base}/v2/models/{model}/ready").status_code == 200
            except httpx.HTTPError:
                ready[model] = False
        return ready

    def live(self, client: httpx.Client) -> bool:
        """Whether the server answers its liveness check (models may still be loading)."""
        try:
            url = f"http://{self.address.host}:{self.address.http_port}/v2/health/live"
            return client.get(url).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the server is live and every model of ``load_at_start`` is READY."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process is None or self.process.poll() is not None:
                    raise WorkerStartError(f"worker {self.address.name} exited; see {self.log_path}")
                if self.live(client) and all(self.models_ready(client).values()):
                    return
                time.sleep(0.25)
        raise WorkerStartError(
            f"worker {self.address.name} not ready after {timeout_s:.0f} s; see {self.log_path}"
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """Stop cleanly; return the exit code (None if it was never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.exit_timeout_s + 5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self._kill_orphaned_stubs(process.pid)
        self._remove_leftover_shm()
        return process.returncode

    @staticmethod
    def _kill_orphaned_stubs(group: int) -> None:
        """A server that died abruptly leaves its python-backend stubs running in its process
        group (the worker was started in a session of its own); end them."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                os.killpg(group, 0)  # raises ProcessLookupError once the group is gone
                time.sleep(0.05)

    def _remove_leftover_shm(self) -> None:
        for region in SHM_DIR.glob(f"{self.shm_prefix}*"):
            region.unlink(missing_ok=True)


class Supervisor:
    """All local workers; see the module docstring."""

    def __init__(self, config: StackConfig, runtime: TritonRuntime, repository: Path,
                 log_dir: Path) -> None:
        self._settings = config.triton
        self.workers = [
            WorkerProcess(address, runtime, config.triton, repository, log_dir)
            for address in worker_addresses(config)
        ]
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start every worker and wait until all are ready; on failure stop them all."""
        try:
            for worker in self.workers:
                worker.start()
            for worker in self.workers:
                worker.wait_ready(self._settings.ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        self._monitor = threading.Thread(target=self._watch, name="worker-monitor", daemon=True)
        self._monitor.start()

    def add(self, worker: WorkerProcess) -> None:
        """Watch (and at ``stop()`` stop) a worker started after ``start()``."""
        with self._lock:
            self.workers = [*self.workers, worker]

    def remove(self, worker: WorkerProcess) -> None:
        """Stop watching a worker (the caller stops it)."""
        with self._lock:
            self.workers = [w for w in self.workers if w is not worker]

    def _watch(self) -> None:
        while not self._stopping.wait(1.0):
            for worker in list(self.workers):
                if worker.alive() or self._stopping.is_set() or worker.process is None:
                    continue
                if self._stopping.wait(self._settings.restart_backoff_s):
                    return
                if worker not in self.workers:
                    continue  # removed (drained) meanwhile
                worker.stop()
                worker.restarts += 1
                worker.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        for worker in list(self.workers):
            worker.stop()
