"""The serving path outside the engine: fixed latencies before and after an LLM worker's engine.

On the real stack a dispatched request reaches the engine only after the gateway, gRPC, Triton
and the model's ``execute`` have handed it on (``request_s``), and a first token, an end or a
queue timeout reaches the gateway and the client only after it has crossed the model's response
sender, Triton, gRPC, the gateway and SSE (``response_s``); neither occupies an engine step.
``DelayedReports`` wraps the driver's ``WorkerListener`` so that each report arrives
``response_s`` after the engine made it, in the order it was made (equal delays keep the order;
the loop breaks time ties by sequence); ``ServedPath.enqueue`` hands a dispatched sequence to the
engine ``request_s`` later. With 0 for both the worker is driven directly, exactly as without a path.

Where the numbers come from (``from_profile``): ``bench.studies.served_ttft`` measures the whole path
(``path_s``: an idle client's first-token time minus the engine's prefill); it cannot tell the
two directions apart, so a profile with only that puts all of it after the engine (as before).
``bench.studies.served_cost`` measures the response direction on its own (``end_path_s``: a closed-loop
stream's tail past its end-of-generation step: the final response, usage and ``[DONE]``); with it,
``response_s = min(end_path_s, path_s)`` and ``request_s`` is the rest of ``path_s``. An idle first
token comes ``path_s`` after its engine prefill either way; the split decides which engine step a
request arriving under load can join.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from simulator.engine import ARRIVAL, STEP, EventLoop
from simulator.llm_worker import Sequence, WorkerListener


class Engine(Protocol):
    """What a path hands a sequence to: any simulated worker's engine."""

    def enqueue(self, sequence: Sequence) -> None: ...


@dataclass(frozen=True)
class ServedPath:
    """``response_s``: seconds from the engine's report to the driver seeing it; ``request_s``:
    from the driver's dispatch to the engine seeing the request (both >= 0)."""

    response_s: float = 0.0
    request_s: float = 0.0

    def __post_init__(self) -> None:
        if not (self.response_s >= 0 and self.request_s >= 0):
            raise ValueError("response_s and request_s must be >= 0")

    @classmethod
    def from_profile(cls, data: dict[str, Any]) -> ServedPath:
        """From a fitted worker profile's ``served`` entry (``path_s``, ``end_path_s``; module
        docstring); none of them: no path."""
        served = data.get("served", {})
        path_s = float(served.get("path_s", 0.0))
        if served.get("end_path_s") is None:
            return cls(path_s)
        response_s = min(max(0.0, float(served["end_path_s"])), path_s)
        return cls(response_s, path_s - response_s)

    def wrap(self, listener: WorkerListener, loop: EventLoop) -> WorkerListener:
        """The listener a worker reports to: ``listener`` itself when there is no response path."""
        return listener if self.response_s == 0 else DelayedReports(listener, loop, self.response_s)

    def enqueue(self, worker: Engine, sequence: Sequence, loop: EventLoop) -> None:
        """Hand ``sequence`` to ``worker`` now, or ``request_s`` later (an arrival at the engine)."""
        if self.request_s == 0:
            worker.enqueue(sequence)
        else:
            loop.at(loop.now + self.request_s, ARRIVAL, lambda: worker.enqueue(sequence))


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
