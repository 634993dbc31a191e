"""A worker that fails a call is down at once and polled quickly until it answers READY again
(``WorkerPool.mark_down``); its gRPC client's repository index is scripted here."""

from __future__ import annotations

import asyncio
from typing import Any

from tritonclient.utils import InferenceServerException

from gateway.transport.triton.workers import WorkerPool
from settings.workers import WorkerAddress

ADDRESS = WorkerAddress("local-cpu", 0, "cpu", "local", "127.0.0.1", 1, 2, 3, ("embed",))
READY = {"models": [{"name": "embed", "version": "1", "state": "READY"}]}


async def test_a_failed_worker_is_down_at_once_and_ready_again_within_the_recovery_poll() -> None:
    pool = WorkerPool.connect([ADDRESS], poll_interval_s=3600)
    pool.recovery_poll_s = 0.01
    answers: list[dict[str, Any]] = [READY, {}, {}, READY]

    async def index(**_: Any) -> dict[str, Any]:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    worker = pool.workers[0]
    worker.client.get_model_repository_index = index  # type: ignore[method-assign]
    refreshed: list[frozenset[str]] = []
    pool.on_refresh.append(lambda: refreshed.append(worker.ready_models))
    await pool.start()
    try:
        assert worker.ready_models == {"embed"}
        pool.mark_down(worker)
        assert worker.ready_models == frozenset() and refreshed[-1] == frozenset()  # before any poll
        for _ in range(200):
            if worker.ready_models:
                break
            await asyncio.sleep(0.01)
        assert worker.ready_models == {"embed"} and refreshed[-1] == {"embed"}
    finally:
        await pool.close()


async def test_a_worker_that_was_never_ready_is_not_recovery_polled() -> None:
    """A replica slot nobody started answers nothing: the regular poll is enough for it."""
    pool = WorkerPool.connect([ADDRESS], poll_interval_s=3600)
    pool.recovery_poll_s = 0.01
    calls = 0

    async def index(**_: Any) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        raise InferenceServerException("failed to connect to all addresses")

    pool.workers[0].client.get_model_repository_index = index  # type: ignore[method-assign]
    await pool.start()
    try:
        await asyncio.sleep(0.1)
        assert calls == 1 and not pool._recovering
    finally:
        await pool.close()
