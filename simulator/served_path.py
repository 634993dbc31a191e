"""The serving path outside the engine: a fixed latency on every report an LLM worker makes.

On the real stack a first token, an end or a queue timeout reaches the gateway and the client
only after it has crossed the model's response sender, Triton, gRPC, the gateway and SSE; that
time occupies no engine step. ``ServedPath.response_s`` is that latency (``bench.served_path``
measures it on single requests to an idle stack; 0 models no path). ``DelayedReports`` wraps the
driver's ``WorkerListener`` so that each report arrives ``response_s`` after the engine made it,
in the order it was made (equal delays keep the order; the loop breaks time ties by sequence).
With 0 the worker reports directly, exactly as without a path.

Why all of it after the engine: the measured latency is the client's first-token time minus the
engine's prefill; the two directions of the path (request to the engine, response back) cannot be
told apart from the client's and the gateway's clocks, and on an idle engine the split does not
change a first token's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.engine import STEP, EventLoop
from simulator.llm_worker import WorkerListener


@dataclass(frozen=True)
class ServedPath:
    """``response_s``: seconds from the engine's report to the driver seeing it (>= 0)."""

    response_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.response_s >= 0:
            raise ValueError("response_s must be >= 0")

    @classmethod
    def from_profile(cls, data: dict[str, Any]) -> ServedPath:
        """From a fitted worker profile's ``served`` entry (``path_s``; none: no path)."""
        return cls(float(data.get("served", {}).get("path_s", 0.0)))

    def wrap(self, listener: WorkerListener, loop: EventLoop) -> WorkerListener:
        """The listener a worker reports to: ``listener`` itself when there is no path."""
        return listener if self.response_s == 0 else DelayedReports(listener, loop, self.response_s)


NO_PATH = ServedPath()  # the default: the engine's reports reach the driver at once


class DelayedReports:
    """A ``WorkerListener`` that hands each report to ``inner`` ``delay_s`` later (module docstring)."""

    def __init__(self, inner: WorkerListener, loop: EventLoop, delay_s: float) -> None:
        self.inner = inner
        self.loop = loop
        self.delay_s = delay_s

    def first_token(self, request_id: str, now: float) -> None:
        at = now + self.delay_s
        self.loop.at(at, STEP, lambda: self.inner.first_token(request_id, at))

    def finished(self, request_id: str, now: float, generated_tokens: int) -> None:
        at = now + self.delay_s
        self.loop.at(at, STEP, lambda: self.inner.finished(request_id, at, generated_tokens))

    def dropped(self, request_id: str, now: float) -> None:
        at = now + self.delay_s
        self.loop.at(at, STEP, lambda: self.inner.dropped(request_id, at))
