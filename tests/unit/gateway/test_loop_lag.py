"""The gateway's loop-lag watch: a callback that blocks the loop shows as lag of about its length."""

from __future__ import annotations

import asyncio
import contextlib
import time

from prometheus_client import CollectorRegistry, Histogram

from gateway.loop_lag import watch_loop_lag
from gateway.metrics import LOOP_LAG_BUCKETS_S


def _observed(registry: CollectorRegistry, over_s: float) -> tuple[float, float]:
    count = registry.get_sample_value("lag_seconds_count") or 0.0
    under = registry.get_sample_value("lag_seconds_bucket", {"le": str(over_s)}) or 0.0
    return count, count - under


async def test_a_blocking_callback_is_observed_as_loop_lag() -> None:
    registry = CollectorRegistry()
    lag = Histogram("lag_seconds", "lag", buckets=LOOP_LAG_BUCKETS_S, registry=registry)
    watch = asyncio.create_task(watch_loop_lag(lag, interval_s=0.005))
    await asyncio.sleep(0.05)
    quiet_count, quiet_over = _observed(registry, 0.025)
    time.sleep(0.06)  # blocks the loop
    await asyncio.sleep(0.02)
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    count, over = _observed(registry, 0.025)
    assert quiet_count >= 3
    assert count > quiet_count and over > quiet_over  # the wake-up due during the block came >= 25 ms late
