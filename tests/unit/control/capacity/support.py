"""A capacity controller over the shipped stack configuration whose replicas never start: the
supervisor's workers are adopted as configured, the clock is a test clock, the registry a SQLite
file. Shared by the controller's and the ``shunter scale`` CLI's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from control.capacity.controller import CapacityController
from control.capacity.replicas import ReplicaSet
from control.registry import Registry
from control.supervisor import Supervisor
from control.triton_runtime import TritonRuntime
from settings.capacity import load_capacity
from settings.control import ReplicaSettings
from settings.paths import StackPaths
from settings.scheduling import load_scheduling
from settings.stack import load_stack_config

TOKEN = "admin-test-token"
CAPACITY = {
    "controller": {"period_s": 1, "scale_down_window_s": 5},
    "models": {"embed": {"pools": {"local-cpu": {"min_replicas": 1, "max_replicas": 2}}},
               "vision": {"scale_to_zero": {"enabled": True, "idle_s": 3600},
                          "pools": {"local-cpu": {"min_replicas": 0, "max_replicas": 1}}}},
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def open_controller(tmp_path: Path, clock: Clock) -> Iterator[CapacityController]:
    shipped = StackPaths()
    stack = load_stack_config(shipped.pools_file, shipped.models_file)
    (tmp_path / "capacity.yaml").write_text(yaml.safe_dump(CAPACITY))
    capacity = load_capacity(tmp_path / "capacity.yaml", stack, load_scheduling(shipped.scheduling_file, stack))
    runtime = TritonRuntime(Path("/nonexistent/tritonserver"), None, {})
    supervisor = Supervisor(stack, runtime, tmp_path / "repository", tmp_path / "logs")  # never started
    replicas = ReplicaSet(stack, capacity.slots, supervisor, runtime, tmp_path / "repository", tmp_path / "logs",
                          ReplicaSettings(), lambda model: {1}, clock=clock)
    registry = Registry.open(f"sqlite:///{tmp_path / 'registry.db'}", clock=clock)
    try:
        yield CapacityController(capacity, stack, replicas, [], registry, ReplicaSettings(), clock=clock)
    finally:
        replicas.close()
        registry.close()


