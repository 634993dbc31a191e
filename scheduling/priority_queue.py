"""Strict tier priority without tenant fairness (the ``priority-only`` baseline of the simulator).

Premium before standard before batch; inside a tier, arrival order, whoever the tenant. It has the
FIFO queue's interface (and is one) so that one scheduler drives either; lanes keep a full worker
of one model from holding back another model's requests.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from scheduling.fair_queue import TIERS_IN_ORDER, Lane, lane_of
from scheduling.fifo_queue import FifoQueue
from scheduling.requests import Request
from scheduling.tenants import Tier

_Band = tuple[Lane, Tier]


@dataclass
class TierPriorityQueue(FifoQueue):
    _bands: dict[_Band, OrderedDict[str, tuple[int, Request]]] = field(default_factory=dict)
    _band_of: dict[str, _Band] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._band_of)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._band_of

    def push(self, request: Request) -> None:
        band = (lane_of(request), request.tier)
        self._seq += 1
        self._bands.setdefault(band, OrderedDict())[request.request_id] = (self._seq, request)
        self._band_of[request.request_id] = band

    def remove(self, request_id: str) -> Request | None:
        band = self._band_of.pop(request_id, None)
        if band is None:
            return None
        return self._bands[band].pop(request_id)[1]

    def candidates(self, blocked: Callable[[Lane], bool]) -> Iterator[Request]:
        """Band heads: higher tier first, then arrival order."""
        rank = TIERS_IN_ORDER.index
        heads = sorted((rank(band[1]), *next(iter(entries.values())))
                       for band, entries in self._bands.items() if entries)
        for _, _, request in heads:
            if not blocked(lane_of(request)):
                yield request

    def queued(self) -> Iterator[Request]:
        return (request for entries in self._bands.values() for _, request in entries.values())

    def ordered(self) -> list[Request]:
        rank = TIERS_IN_ORDER.index
        entries = [entry for band in self._bands.values() for entry in band.values()]
        return [request for _, request in sorted(entries, key=lambda e: (rank(e[1].tier), e[0]))]
