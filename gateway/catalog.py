"""The models a gateway serves: configuration, what the workers serve, tokenizers and caches.

``ModelCatalog.model_for(name, kinds, tenant)`` is the one place that decides whether a model
name is known (404), allowed to the tenant (403) and fits the API being called (400).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from gateway.errors import InvalidRequestError, ModelNotFoundError, PermissionDeniedError
from gateway.response_cache import ResponseCache
from gateway.tokenization import LlmTokenizer, Offload, TextTokenizer
from gateway.transport.protocol import Transport
from scheduling.tenants import Tenant
from settings.stack import ModelSpec, StackConfig, WorkloadKind


@dataclass
class ModelCatalog:
    config: StackConfig
    transport: Transport
    llm_tokenizers: Mapping[str, LlmTokenizer] = field(default_factory=dict)
    text_tokenizers: Mapping[str, TextTokenizer] = field(default_factory=dict)
    offload: Offload = field(default_factory=lambda: Offload(threads=2))  # tokenising, off the event loop
    _caches: dict[str, ResponseCache] = field(default_factory=dict)

    def served_models(self) -> list[ModelSpec]:
        """Configured models that some worker serves, in configuration order."""
        served = self.transport.served_models()
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

    def cache_for(self, model: ModelSpec) -> ResponseCache | None:
        """The model's response cache, or None when ``cache_entries`` is 0."""
        if model.cache_entries == 0:
            return None
        return self._caches.setdefault(model.name, ResponseCache(model.cache_entries))
