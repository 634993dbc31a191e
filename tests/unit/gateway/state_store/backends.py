"""The contract tests' view of a backend (built by the ``backend`` fixture in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.state_store.protocol import StateStore


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    store: StateStore
    advance: Callable[[float], Awaitable[None]]  # let this much time pass for the TTLs
    another: Callable[[], Awaitable[StateStore]]  # a second gateway's store
