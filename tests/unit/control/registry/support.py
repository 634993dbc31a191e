"""Helpers shared by the registry tests."""

from __future__ import annotations

from control.registry import Registry, RuntimeRequirements, VersionRecord

CHAT = RuntimeRequirements(backend="python", kind="chat", gpu_types=("h100", "l4"), min_gpu_memory_gb=16.0)


class StepClock:
    """Returns 1000.0, 1001.0, ... so every reading is a distinct, increasing time."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start - 1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def register(registry: Registry, model: str = "chat", version: int = 1, actor: str = "alice") -> VersionRecord:
    return registry.register_version(
        model, version, f"s3://models/{model}/{version}", f"sha256:{version:064x}", "release-key", CHAT, actor
    )
