"""Which version of a model a request goes to, as the control plane says, picked up live.

``RoutingTable`` holds one ``TrafficSplit`` per model. It starts from the stack configuration
(each model's configured version at 100 %) and, when the gateway is given the control API's
address, ``RoutingPoller`` replaces it from ``GET /admin/v1/routing`` every ``interval_s`` (a
change of alias or weights reaches new requests within that interval plus one poll; no restart).
If control is unreachable the table keeps its last known routes: serving continues on what was
live. ``version_for`` picks the version for one HTTP request once and remembers it in the
request's context, so the cache key, the scheduler's placement and the Triton call all agree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from gateway.context import RequestContext
from gateway.periodic import start_periodic, stop
from scheduling.tenants import Tenant
from scheduling.traffic_split import StickyTo, TrafficSplit
from settings.stack import StackConfig

log = logging.getLogger(__name__)


@dataclass
class RoutingTable:
    splits: dict[str, TrafficSplit]
    generation: int = 0
    on_change: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: StackConfig) -> RoutingTable:
        return cls({m.name: TrafficSplit(m.name, {m.version: 100.0}) for m in config.models})

    def choose(self, model: str, request_id: str, tenant: str, user: str | None = None) -> int:
        return self.splits[model].choose(request_id, tenant, user)

    def live_versions(self) -> dict[str, frozenset[int]]:
        """Model -> every live version (the ones workers must have READY), weight 0 included."""
        return {model: split.versions for model, split in self.splits.items()}

    def replace(self, generation: int, splits: Mapping[str, TrafficSplit]) -> None:
        """Install the control plane's routes (models it does not name keep theirs)."""
        self.splits = {**self.splits, **splits}
        self.generation = generation
        for callback in self.on_change:
            callback()


def version_for(table: RoutingTable, context: RequestContext, tenant: Tenant, model: str) -> int:
    """The version serving this request, chosen on first call and then remembered in its context."""
    if context.model_version is None:
        context.model_version = table.choose(model, context.request_id, tenant.name, context.user)
    return context.model_version


def parse_routes(body: Any) -> tuple[int, dict[str, TrafficSplit]]:
    """The control API's routing document -> (generation, splits); ValueError if malformed."""
    if not isinstance(body, dict) or not isinstance(body.get("aliases"), list):
        raise ValueError("routing document must be an object with an 'aliases' list")
    splits = {}
    for alias in body["aliases"]:
        weights = {int(v): float(w) for v, w in alias["weights"].items()}
        splits[alias["model"]] = TrafficSplit(alias["model"], weights, StickyTo(alias.get("sticky", "request")),
                                              int(alias.get("generation", 0)))
    return int(body["generation"]), splits


@dataclass
class RoutingPoller:
    """Polls the control API's routing document into ``table`` until closed."""

    table: RoutingTable
    url: str
    admin_token: str
    interval_s: float = 0.5
    timeout_s: float = 2.0
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.timeout_s,
                                         headers={"Authorization": f"Bearer {self.admin_token}"})
        await self.poll_once()
        self._task = start_periodic(self.poll_once, self.interval_s, "routing-poller")

    async def close(self) -> None:
        await stop(self._task)
        if self._client is not None:
            await self._client.aclose()

    async def poll_once(self) -> bool:
        """Fetch the routes; install them if the generation changed. False if control was unreachable."""
        assert self._client is not None
        try:
            response = await self._client.get(self.url)
            response.raise_for_status()
            generation, splits = parse_routes(response.json())
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            log.warning("routing: keeping the last known routes; control at %s: %s", self.url, exc)
            return False
        if generation != self.table.generation:
            self.table.replace(generation, splits)
        return True
