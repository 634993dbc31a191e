"""Control's replica states as the gateway applies them: which workers placement may use, and the
poller of the replicas document (its staleness, its fallback to Triton readiness)."""

from __future__ import annotations

import httpx
import pytest

from gateway.replicas import ReplicasPoller, gate_views, replicas_url
from settings.capacity_wire import ReplicasDocument, ReplicaState, ReplicaWire
from tests.unit.scheduling.factories import view

MODELS = ("chat", "embed")


def _replica(index: int, state: ReplicaState, models: tuple[str, ...] = MODELS) -> ReplicaWire:
    return ReplicaWire(pool="p", index=index, name=f"p-{index}", state=state, models=models)


def _views() -> list:  # type: ignore[type-arg]
    return [view(f"p-{i}", pool="p", models=MODELS) for i in range(4)]


def test_only_ready_replicas_keep_the_models_they_list_as_warmed() -> None:
    document = ReplicasDocument(replicas=(
        _replica(0, ReplicaState.READY), _replica(1, ReplicaState.STARTING),
        _replica(2, ReplicaState.DRAINING), _replica(3, ReplicaState.READY, models=("chat",))))
    gated = {v.worker_id: v for v in gate_views(_views(), document)}
    assert set(gated["p-0"].ready_models) == {"chat", "embed"} and gated["p-0"].healthy
    assert gated["p-1"].ready_models == {} and not gated["p-1"].healthy  # starting: Triton may say READY already
    assert gated["p-2"].ready_models == {} and not gated["p-2"].healthy  # draining: no new work
    assert set(gated["p-3"].ready_models) == {"chat"}  # embed loaded but not warmed (or being unloaded)


def test_a_worker_control_does_not_list_keeps_its_triton_readiness() -> None:
    document = ReplicasDocument(replicas=(_replica(0, ReplicaState.DRAINING),))
    gated = gate_views(_views(), document)
    assert [set(v.ready_models) for v in gated[1:]] == [set(MODELS)] * 3
    assert gate_views(_views(), None) == _views()  # no document: Triton readiness alone


class _Control:
    """An in-memory control answering the replicas document, or failing."""

    def __init__(self) -> None:
        self.document = ReplicasDocument(replicas=(_replica(0, ReplicaState.READY),), cold_start_s={"embed": 4.0})
        self.status = 200
        self.seen_auth: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen_auth.append(request.headers.get("authorization", ""))
        if self.status != 200:
            return httpx.Response(self.status, json={"error": "nope"})
        return httpx.Response(200, content=self.document.model_dump_json())


async def test_the_poller_keeps_a_fresh_document_and_falls_back_when_control_is_gone() -> None:
    control, now = _Control(), [0.0]
    poller = ReplicasPoller(replicas_url("http://control/"), "token", stale_after_s=5.0, clock=lambda: now[0],
                            http_transport=httpx.MockTransport(control.handle))
    changes: list[int] = []
    poller.on_change.append(lambda: changes.append(1))
    await poller.start()
    try:
        assert poller.url == "http://control/admin/capacity/replicas"
        assert poller.document == control.document and control.seen_auth == ["Bearer token"]
        assert changes == [1]
        assert await poller.poll_once() and changes == [1]  # the same document: no change
        control.status = 503
        now[0] = 3.0
        assert not await poller.poll_once()
        assert poller.document == control.document  # still fresh: 3 s since the last answer
        now[0] = 6.0
        assert not await poller.poll_once()
        assert poller.document is None and changes == [1, 1]  # stale: route on Triton readiness alone
        control.status = 200
        control.document = ReplicasDocument(replicas=(_replica(0, ReplicaState.DRAINING),))
        assert await poller.poll_once()
        assert poller.document == control.document and changes == [1, 1, 1]
    finally:
        await poller.close()


@pytest.mark.parametrize("body", [b"not json", b'{"replicas": [{"pool": "p"}]}'])
async def test_a_malformed_document_counts_as_no_answer(body: bytes) -> None:
    poller = ReplicasPoller("http://control/x", "t",
                            http_transport=httpx.MockTransport(lambda _: httpx.Response(200, content=body)))
    await poller.start()
    try:
        assert poller.document is None
    finally:
        await poller.close()
