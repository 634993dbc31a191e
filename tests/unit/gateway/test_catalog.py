"""``ModelCatalog.model_for``: the one decision on a model name (404, 403, 400)."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.errors import InvalidRequestError, ModelNotFoundError, PermissionDeniedError
from settings.stack import WorkloadKind
from tests.unit.gateway.conftest import InProcessGateway


async def test_a_model_is_found_allowed_and_of_the_right_kind_or_refused(gw: InProcessGateway) -> None:
    catalog = gw.gateway.models
    tenant = gw.gateway.tenants.authenticate("demo-standard-key")
    assert tenant is not None
    assert catalog.model_for("chat", {WorkloadKind.LLM}, tenant).name == "chat"
    with pytest.raises(ModelNotFoundError):
        catalog.model_for("nope", set(), tenant)
    with pytest.raises(InvalidRequestError, match="is a llm model; this endpoint needs embedding"):
        catalog.model_for("chat", {WorkloadKind.EMBEDDING}, tenant)
    limited = dataclasses.replace(tenant, allowed_models=frozenset({"embed"}))
    with pytest.raises(PermissionDeniedError):
        catalog.model_for("chat", set(), limited)


async def test_only_models_some_worker_serves_are_known(gw: InProcessGateway) -> None:
    gw.workers.addresses = [dataclasses.replace(a, models=("embed",)) for a in gw.workers.addresses]
    assert [m.name for m in gw.gateway.models.served_models()] == ["embed"]
