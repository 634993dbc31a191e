"""Background polling loops of the gateway (worker readiness, control's routing): one shape.

``start_periodic(call, every_s, name)`` runs ``await call()`` every ``every_s`` seconds in a task
(the caller makes the first call itself, before serving); ``stop(task)`` cancels it and waits.
Each call bounds its own I/O; a loop never ends on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any


def start_periodic(call: Callable[[], Awaitable[Any]], every_s: float, name: str) -> asyncio.Task[None]:
    async def loop() -> None:
        while True:
            await asyncio.sleep(every_s)
            await call()
    return asyncio.create_task(loop(), name=name)


async def stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
