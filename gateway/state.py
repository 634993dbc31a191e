"""Everything a request handler needs, built once at startup (the gateway's composition root).

``GatewayState.model_for(name, kinds)`` is the one place that decides whether a model name is
known (404) and fits the API being called (400).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field

from gateway.coalescer import RowCoalescer
from gateway.dispatcher import Dispatcher
from gateway.errors import InvalidRequestError, ModelNotFoundError, PermissionDeniedError
from gateway.metrics import GatewayMetrics
from gateway.response_cache import ResponseCache
from gateway.routing import RoutingTable
from gateway.tokenization import LlmTokenizer, TextTokenizer
from gateway.workers import WorkerPool
from scheduling.tenants import Tenant
from settings.scheduling import SchedulingSettings
from settings.stack import ModelSpec, StackConfig, WorkloadKind
from settings.tenants import TenantDirectory


class IdempotencyLedger:
    """(tenant, Idempotency-Key) -> request id of the first request that used it, bounded LRU.

    In memory for now: the durable state store and the replay semantics come with the
    scheduling issue.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self._entries: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._capacity = capacity

    def remember(self, tenant: str, key: str, request_id: str) -> str:
        """Store ``request_id`` under the key unless present; return the stored request id."""
        entry = (tenant, key)
        if entry in self._entries:
            self._entries.move_to_end(entry)
            return self._entries[entry]
        self._entries[entry] = request_id
        if len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return request_id


@dataclass
class GatewayState:
    config: StackConfig
    tenants: TenantDirectory
    pool: WorkerPool
    metrics: GatewayMetrics
    scheduling: SchedulingSettings
    dispatcher: Dispatcher
    llm_tokenizers: dict[str, LlmTokenizer] = field(default_factory=dict)
    text_tokenizers: dict[str, TextTokenizer] = field(default_factory=dict)
    idempotency: IdempotencyLedger = field(default_factory=IdempotencyLedger)
    routing: RoutingTable = field(default_factory=lambda: RoutingTable({}))
    coalescers: dict[tuple[str, str, int | None, tuple[str, ...]], RowCoalescer] = field(default_factory=dict)
    caches: dict[str, ResponseCache] = field(default_factory=dict)

    def cache_for(self, model: ModelSpec) -> ResponseCache | None:
        if model.cache_entries == 0:
            return None
        return self.caches.setdefault(model.name, ResponseCache(model.cache_entries))

    def served_models(self) -> list[ModelSpec]:
        served = self.pool.served_models()
        return [m for m in self.config.models if m.name in served]

    def model_for(self, name: str, kinds: Collection[WorkloadKind], tenant: Tenant) -> ModelSpec:
        spec = next((m for m in self.served_models() if m.name == name), None)
        if spec is None:
            raise ModelNotFoundError(f"the model '{name}' does not exist", param="model")
        if not tenant.may_use_model(name):
            raise PermissionDeniedError(f"your tenant may not use the model '{name}'", param="model")
        if kinds and spec.kind not in kinds:
            wanted = " or ".join(sorted(k.value for k in kinds))
            raise InvalidRequestError(
                f"the model '{name}' is a {spec.kind.value} model; this endpoint needs {wanted}",
                param="model", code="model_not_supported",
            )
        return spec
