"""The tenants file: API keys (stored only as SHA-256) mapped to tenants.

``load_tenants(path)`` returns a ``TenantDirectory``; ``authenticate(api_key)`` hashes the key
and compares in constant time per candidate, so neither the key nor its hash ever needs to be
logged or kept in memory beyond the call.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Annotated

from pydantic import Field

from scheduling.tenants import Quotas, Tenant, Tier
from settings.base import ConfigError, StrictModel, read_yaml


def hash_api_key(api_key: str) -> str:
    """The at-rest form of an API key (lowercase hex SHA-256)."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


class _QuotasEntry(StrictModel):
    tokens_per_minute: Annotated[int, Field(gt=0)] | None = None
    requests_per_second: Annotated[float, Field(gt=0)] | None = None
    max_concurrent: Annotated[int, Field(gt=0)] | None = None


class _TenantEntry(StrictModel):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    tier: Tier
    weight: Annotated[float, Field(gt=0)] = 1.0
    api_key_sha256: tuple[Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")], ...]
    quotas: _QuotasEntry = _QuotasEntry()
    allowed_regions: tuple[str, ...] = ()
    allowed_models: tuple[str, ...] = ()

    def to_tenant(self) -> Tenant:
        return Tenant(
            name=self.name, tier=self.tier, weight=self.weight,
            quotas=Quotas(**self.quotas.model_dump()),
            allowed_regions=frozenset(self.allowed_regions),
            allowed_models=frozenset(self.allowed_models),
        )


class _TenantsFile(StrictModel):
    tenants: tuple[_TenantEntry, ...]


class TenantDirectory:
    def __init__(self, by_key_hash: dict[str, Tenant]) -> None:
        self._by_key_hash = by_key_hash

    @property
    def tenants(self) -> list[Tenant]:
        return sorted(set(self._by_key_hash.values()), key=lambda t: t.name)

    def authenticate(self, api_key: str) -> Tenant | None:
        digest = hash_api_key(api_key)
        found = None
        for key_hash, tenant in self._by_key_hash.items():
            if hmac.compare_digest(key_hash, digest):
                found = tenant
        return found


def load_tenants(path: Path) -> TenantDirectory:
    """Read and validate the tenants file; raise ConfigError naming the file."""
    raw = read_yaml(path)
    try:
        parsed = _TenantsFile.model_validate(raw)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    by_hash: dict[str, Tenant] = {}
    for entry in parsed.tenants:
        tenant = entry.to_tenant()
        for key_hash in entry.api_key_sha256:
            if key_hash in by_hash:
                raise ConfigError(f"{path}: an API key is listed for two tenants")
            by_hash[key_hash] = tenant
    return TenantDirectory(by_hash)
