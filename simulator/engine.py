"""The discrete-event engine: a heap of ``(time_s, priority, seq, event)`` entries in virtual time.

Contract: events run in time order; at equal times the lower ``priority`` runs first, and at equal
priority the one scheduled first (``seq`` is a counter owned by each loop, not a global), so the
same inputs always run in the same order. Nothing here reads a clock or a global RNG.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

# Event priorities at equal times: workers report finished steps before new arrivals are admitted,
# and deadline wakes run last (so a request finishing at its deadline is not expired).
STEP = 0
ARRIVAL = 1
WAKE = 2


@dataclass
class Event:
    """A scheduled action; ``cancel()`` makes it a no-op (it stays in the heap until popped)."""

    time_s: float
    action: Callable[[], None] = field(repr=False)
    alive: bool = True

    def cancel(self) -> None:
        self.alive = False


class EventLoop:
    """Runs events in ``(time_s, priority, seq)`` order; ``now`` is the current virtual time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.processed = 0
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = 0
        self._stopped = False

    def stop(self) -> None:
        """End ``run`` after the current event."""
        self._stopped = True

    def at(self, time_s: float, priority: int, action: Callable[[], None]) -> Event:
        """Schedule ``action`` at ``time_s`` (never before ``now``)."""
        event = Event(max(time_s, self.now), action)
        self._seq += 1
        heapq.heappush(self._heap, (event.time_s, priority, self._seq, event))
        return event

    def __len__(self) -> int:
        return len(self._heap)

    def run(self, until_s: float | None = None, on_event: Callable[[float], None] | None = None) -> None:
        """Run events until the heap is empty (or the next one is after ``until_s``)."""
        heap = self._heap
        self._stopped = False
        while heap and not self._stopped:
            if until_s is not None and heap[0][0] > until_s:
                break
            time_s, _, _, event = heapq.heappop(heap)
            if not event.alive:
                continue
            self.now = time_s
            event.alive = False
            event.action()
            self.processed += 1
            if on_event is not None:
                on_event(time_s)
