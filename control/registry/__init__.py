"""The control plane's model registry: versions, routing aliases, deployments, rollouts, audit log.

``Registry.open(url)`` migrates the database (a SQLite file by default, PostgreSQL by URL) and
returns the registry; every read returns the frozen records defined in ``records.py``.
"""

from control.registry.errors import (
    RegistryConflictError,
    RegistryError,
    RegistryNotFoundError,
    RegistryValidationError,
)
from control.registry.records import (
    AliasRecord,
    AuditEntry,
    DeploymentRecord,
    RolloutRecord,
    RolloutStatus,
    RuntimeRequirements,
    VersionRecord,
    VersionState,
    validate_weights,
)
from control.registry.registry import Registry

__all__ = [
    "AliasRecord",
    "AuditEntry",
    "DeploymentRecord",
    "Registry",
    "RegistryConflictError",
    "RegistryError",
    "RegistryNotFoundError",
    "RegistryValidationError",
    "RolloutRecord",
    "RolloutStatus",
    "RuntimeRequirements",
    "VersionRecord",
    "VersionState",
    "validate_weights",
]
