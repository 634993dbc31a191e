"""The baseline queue: arrival order, no tiers, no tenant fairness (``--policy fifo``).

It has the fair queue's interface so that one scheduler drives either; lanes keep a full worker
of one model from holding back another model's requests, as any per-model FIFO would.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from scheduling.fair_queue import Lane, lane_of
from scheduling.requests import Request


@dataclass
class FifoQueue:
    counters: dict[str, float] = field(default_factory=dict)
    _lanes: dict[Lane, OrderedDict[str, tuple[int, Request]]] = field(default_factory=dict)
    _lane_of: dict[str, Lane] = field(default_factory=dict)
    _seq: int = 0

    def __len__(self) -> int:
        return len(self._lane_of)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._lane_of

    def push(self, request: Request) -> None:
        lane = lane_of(request)
        self._seq += 1
        self._lanes.setdefault(lane, OrderedDict())[request.request_id] = (self._seq, request)
        self._lane_of[request.request_id] = lane

    def remove(self, request_id: str) -> Request | None:
        lane = self._lane_of.pop(request_id, None)
        if lane is None:
            return None
        return self._lanes[lane].pop(request_id)[1]

    def charge(self, request: Request) -> None:
        """FIFO keeps no service counters."""

    def uncharge(self, request: Request) -> None:
        """FIFO keeps no service counters."""

    def refund(self, request: Request, generated_tokens: int) -> None:
        """FIFO keeps no service counters."""

    def candidates(self, blocked: Callable[[Lane], bool]) -> Iterator[Request]:
        heads = sorted(next(iter(entries.values())) for entries in self._lanes.values() if entries)
        for _, request in heads:
            if not blocked(lane_of(request)):
                yield request

    def queued(self) -> Iterator[Request]:
        return (request for entries in self._lanes.values() for _, request in entries.values())

    def ordered(self) -> list[Request]:
        entries = [entry for lane in self._lanes.values() for entry in lane.values()]
        return [request for _, request in sorted(entries, key=lambda e: e[0])]
