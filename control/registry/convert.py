"""Conversions between the ORM rows of ``schema.py`` and the frozen records of ``records.py``.

JSON columns keyed by version store the keys as strings; these functions turn them back into ints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from control.registry.errors import RegistryValidationError
from control.registry.records import (
    AliasRecord,
    AuditEntry,
    DeploymentRecord,
    RolloutRecord,
    RolloutStatus,
    RuntimeRequirements,
    VersionRecord,
    VersionState,
)
from control.registry.schema import AliasRow, AuditRow, DeploymentRow, RolloutRow, VersionRow


def weights_to_json(weights: Mapping[int, float]) -> dict[str, Any]:
    """``{version: percent}`` -> ``{"version": percent}`` (JSON object keys are strings)."""
    return {str(version): float(percent) for version, percent in sorted(weights.items())}


def weights_from_json(stored: Mapping[str, Any]) -> dict[int, float]:
    return {int(version): float(percent) for version, percent in stored.items()}


def requirements_to_json(requirements: RuntimeRequirements) -> dict[str, Any]:
    stored = asdict(requirements)
    stored["gpu_types"] = list(requirements.gpu_types)
    return stored


def requirements_from_json(stored: Mapping[str, Any]) -> RuntimeRequirements:
    return RuntimeRequirements(
        backend=stored["backend"],
        kind=stored["kind"],
        gpu_types=tuple(stored.get("gpu_types", ())),
        min_gpu_memory_gb=float(stored.get("min_gpu_memory_gb", 0.0)),
        quantization=stored.get("quantization"),
        max_context_tokens=stored.get("max_context_tokens"),
    )


def json_details(details: Mapping[str, object] | None) -> dict[str, Any]:
    """A copy of ``details`` that is known to serialise as JSON, or RegistryValidationError."""
    copied = dict(details or {})
    try:
        return json.loads(json.dumps(copied, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise RegistryValidationError(f"audit details must be JSON-serialisable: {exc}") from exc


def version_record(row: VersionRow) -> VersionRecord:
    return VersionRecord(
        model=row.model,
        version=row.version,
        artifact_uri=row.artifact_uri,
        manifest_digest=row.manifest_digest,
        signer_key_id=row.signer_key_id,
        requirements=requirements_from_json(row.requirements),
        state=VersionState(row.state),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def alias_record(row: AliasRow) -> AliasRecord:
    return AliasRecord(
        model=row.model,
        weights=weights_from_json(row.weights),
        sticky=row.sticky,
        generation=row.generation,
        updated_at=row.updated_at,
    )


def deployment_record(row: DeploymentRow) -> DeploymentRecord:
    return DeploymentRecord(
        model=row.model,
        pools=tuple(row.pools),
        instances=row.instances,
        min_warm_replicas=row.min_warm_replicas,
        updated_at=row.updated_at,
    )


def rollout_record(row: RolloutRow) -> RolloutRecord:
    return RolloutRecord(
        id=row.id,
        model=row.model,
        kind=row.kind,
        baseline_version=row.baseline_version,
        variants=weights_from_json(row.variants),
        sticky=row.sticky,
        status=RolloutStatus(row.status),
        thresholds={str(name): float(value) for name, value in row.thresholds.items()},
        started_at=row.started_at,
        updated_at=row.updated_at,
        started_by=row.started_by,
    )


def audit_entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        at=row.at,
        actor=row.actor,
        action=row.action,
        subject=row.subject,
        reason=row.reason,
        details=dict(row.details),
    )
