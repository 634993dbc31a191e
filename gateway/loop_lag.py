"""The event loop's own lag, measured inside the gateway: ``shunter_gateway_event_loop_lag_seconds``.

``watch_loop_lag`` sleeps ``interval_s`` again and again and observes how much later than asked
each wake-up came: the time the loop spent running other callbacks past the moment it was due
(one blocking callback of B seconds shows as up to B). Unlike a client's probe, it carries no
network round trip and no scheduling of another process, so a bench can tell the loop's lag apart
from its own noise. Cost: one timer callback per ``interval_s``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from prometheus_client import Histogram

LOOP_LAG_INTERVAL_S = 0.01


async def watch_loop_lag(lag_s: Histogram, interval_s: float = LOOP_LAG_INTERVAL_S,
                         clock: Callable[[], float] = time.perf_counter) -> None:
    """Observe the loop's lag into ``lag_s`` every ``interval_s``, until cancelled."""
    while True:
        asked = clock()
        await asyncio.sleep(interval_s)
        lag_s.observe(max(0.0, clock() - asked - interval_s))
