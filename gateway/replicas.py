"""What control says of each replica, and the workers placement may use because of it.

A replica is one Triton worker process of a pool. Triton's own readiness (``READY`` model
versions, polled by the transport) says a model is loaded; control's capacity controller says
more: a replica still ``starting`` (loading, and warming after Triton says READY) or ``draining``
(being removed: in-flight work finishes, no new work) must get no new requests, and a model is
placed on a replica only once control lists it there, loaded *and* warmed
(``settings.capacity_wire``).

``ReplicasPoller`` reads ``GET /admin/capacity/replicas`` from control every ``interval_s``
(each call bounded by ``timeout_s``) and keeps the last document while it is fresh. ``document``
is None when control has not answered for ``stale_after_s`` (unreachable, or a control without a
capacity controller): the gateway then routes on Triton's readiness alone, as before autoscaling.
State changes (control lost, control back) are logged once each, not on every poll.

``gate_views`` applies a document to the core's worker views: a worker that the document lists
keeps only the models it lists as loaded and warmed, and only while the replica is ``ready``; a
worker it does not list keeps its Triton readiness.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import httpx
from pydantic import ValidationError

from gateway.periodic import start_periodic, stop
from scheduling.workers import WorkerView
from settings.capacity_wire import REPLICAS_PATH, ReplicasDocument

log = logging.getLogger(__name__)


def replicas_url(control_url: str) -> str:
    """Where control serves the replicas document."""
    return f"{control_url.rstrip('/')}{REPLICAS_PATH}"


def gate_views(views: Sequence[WorkerView], document: ReplicasDocument | None) -> list[WorkerView]:
    """The views placement may use: see the module docstring (``None``: Triton's readiness alone)."""
    if document is None:
        return list(views)
    listed = {replica.name: replica for replica in document.replicas}
    gated = []
    for view in views:
        replica = listed.get(view.worker_id)
        if replica is None:
            gated.append(view)
            continue
        models = {model: versions for model, versions in view.ready_models.items()
                  if replica.takes_work and model in replica.models}
        gated.append(replace(view, ready_models=models, healthy=view.healthy and bool(models)))
    return gated


@dataclass
class ReplicasPoller:
    """Polls control's replicas document; see the module docstring. ``on_change`` callbacks run
    when the document (or its absence) changes."""

    url: str
    admin_token: str
    interval_s: float = 1.0
    timeout_s: float = 2.0
    stale_after_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    on_change: list[Callable[[], None]] = field(default_factory=list)
    http_transport: httpx.AsyncBaseTransport | None = None  # tests: an in-memory control
    _document: ReplicasDocument | None = field(default=None, repr=False)
    _fetched_s: float = field(default=float("-inf"), repr=False)
    _reachable: bool | None = field(default=None, repr=False)
    _reported: ReplicasDocument | None = field(default=None, repr=False)  # as on_change last saw it
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    @property
    def document(self) -> ReplicasDocument | None:
        """The last document if it is fresh, else None (route on Triton's readiness alone)."""
        if self._document is None or self.clock() - self._fetched_s > self.stale_after_s:
            return None
        return self._document

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.timeout_s, transport=self.http_transport,
                                         headers={"Authorization": f"Bearer {self.admin_token}"})
        await self.poll_once()
        self._task = start_periodic(self.poll_once, self.interval_s, "replicas-poller")

    async def close(self) -> None:
        await stop(self._task)
        if self._client is not None:
            await self._client.aclose()

    async def poll_once(self) -> bool:
        """Fetch the document; False when control did not give a valid one (logged once per change).
        Runs ``on_change`` when what ``document`` says differs from the last time it ran them."""
        assert self._client is not None
        try:
            response = await self._client.get(self.url)
            response.raise_for_status()
            document = ReplicasDocument.model_validate_json(response.content)
        except (httpx.HTTPError, ValidationError) as exc:
            self._reached(False, exc)
        else:
            self._reached(True, None)
            self._document, self._fetched_s = document, self.clock()
        current = self.document
        if current != self._reported:
            self._reported = current
            for callback in self.on_change:
                callback()
        return self._reachable is True

    def _reached(self, ok: bool, error: Exception | None) -> None:
        if ok == self._reachable:
            return
        self._reachable = ok
        if ok:
            log.info("capacity: control's replicas document at %s is back; placing on its replica states", self.url)
        else:
            log.warning("capacity: no replicas document from control at %s (%s); after %.0f s the gateway "
                        "routes on Triton readiness alone", self.url, error, self.stale_after_s)
