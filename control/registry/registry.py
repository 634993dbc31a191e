"""The model registry: versions, routing aliases, deployments, rollouts, capacity settings
(``capacity.py``) and the audit log.

One ``Registry`` object per process is enough and is safe to share between threads (each call opens
its own session); several objects or processes on the same database see each other's committed
changes. Every mutating call runs in one transaction that also appends its audit entry, so a change
is never stored without its audit entry nor the other way round. Model-scoped audit entries use the
model name as ``subject``; the version or rollout id goes into ``details``. Reads return frozen
records from ``records.py``; nothing returned is attached to a session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType

from sqlalchemy import func, select
from sqlalchemy.orm import sessionmaker

from control.registry import convert
from control.registry import queries as q
from control.registry.capacity import CapacitySettingsStore
from control.registry.database import create_registry_engine, upgrade_to_head, writer
from control.registry.errors import RegistryConflictError, RegistryNotFoundError, RegistryValidationError
from control.registry.operator_tokens import OperatorTokens
from control.registry.records import (
    ROLLOUT_KINDS,
    AliasRecord,
    AuditEntry,
    DeploymentRecord,
    RolloutRecord,
    RolloutStatus,
    RuntimeRequirements,
    VersionRecord,
    VersionState,
    validate_sticky,
    validate_thresholds,
    validate_weights,
)
from control.registry.schema import AliasRow, AuditRow, DeploymentRow, ModelRow, RolloutRow, VersionRow


class Registry(CapacitySettingsStore, OperatorTokens):
    """The control plane's model registry over one SQLAlchemy URL (SQLite file or PostgreSQL);
    capacity settings' and operator tokens' methods come from ``CapacitySettingsStore`` and
    ``OperatorTokens``."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time) -> None:
        """Connect lazily to ``url``; call ``migrate()`` (or use ``Registry.open``) before use."""
        self._clock = clock
        self._engine = create_registry_engine(url)
        self._read = sessionmaker(self._engine, expire_on_commit=False)
        self._write = sessionmaker(writer(self._engine), expire_on_commit=False)

    @classmethod
    def open(cls, url: str, clock: Callable[[], float] = time.time) -> Registry:
        """A registry on ``url`` whose schema has been migrated to the newest revision."""
        registry = cls(url, clock)
        try:
            registry.migrate()
        except BaseException:
            registry.close()
            raise
        return registry

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return self._engine.url.render_as_string(hide_password=True)

    def migrate(self) -> None:
        """Upgrade the schema to head (a no-op when it is current); creates a SQLite file's folder."""
        upgrade_to_head(self._engine)

    def close(self) -> None:
        """Close the pooled connections; the object must not be used afterwards."""
        self._engine.dispose()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *_exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    # ---- models and versions -------------------------------------------------------------------

    def ensure_model(self, name: str, kind: str, actor: str) -> None:
        """Create model ``name`` of workload ``kind`` unless it exists (audit ``model.create``).

        Raises RegistryConflictError if it exists with another kind.
        """
        with self._write.begin() as session:
            q.model_for_write(session, self._clock(), q.text("model", name), q.text("kind", kind), actor)

    def register_version(
        self,
        model: str,
        version: int,
        artifact_uri: str,
        manifest_digest: str,
        signer_key_id: str,
        requirements: RuntimeRequirements,
        actor: str,
        reason: str = "",
    ) -> VersionRecord:
        """Register ``version`` of ``model`` in state ``registered`` (audit ``version.register``).

        Creates the model (kind ``requirements.kind``) if missing. Raises RegistryConflictError if
        the version exists or the model has another kind.
        """
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise RegistryValidationError(f"version must be a positive integer, got {version!r}")
        if not isinstance(requirements, RuntimeRequirements):
            raise RegistryValidationError(f"requirements must be RuntimeRequirements, got {type(requirements)}")
        fields = {"artifact_uri": artifact_uri, "manifest_digest": manifest_digest, "signer_key_id": signer_key_id}
        for name, value in fields.items():
            q.text(name, value)
        with self._write.begin() as session:
            now = self._clock()
            q.model_for_write(session, now, q.text("model", model), requirements.kind, q.text("actor", actor))
            if q.version_row(session, model, version) is not None:
                raise RegistryConflictError(f"version {version} of model {model!r} is already registered")
            row = VersionRow(
                model=model, version=version, **fields, requirements=convert.requirements_to_json(requirements),
                state=VersionState.REGISTERED.value, created_at=now, created_by=actor,
            )  # fmt: skip
            session.add(row)
            q.flush_or_conflict(session, f"version {version} of model {model!r} is already registered")
            details = q.merge(None, version=version, requirements=row.requirements, **fields)
            q.append_audit(session, now, actor, "version.register", model, reason, details)
            return convert.version_record(row)

    def version(self, model: str, version: int) -> VersionRecord | None:
        """The version, or None if it is not registered."""
        with self._read() as session:
            row = q.version_row(session, model, version)
            return None if row is None else convert.version_record(row)

    def versions(self, model: str) -> list[VersionRecord]:
        """All versions of ``model`` in ascending order (empty for an unknown model)."""
        query = select(VersionRow).where(VersionRow.model == model).order_by(VersionRow.version)
        with self._read() as session:
            return [convert.version_record(row) for row in session.scalars(query)]

    def models(self) -> list[str]:
        """The registered model names, sorted."""
        with self._read() as session:
            return list(session.scalars(select(ModelRow.name).order_by(ModelRow.name)))

    def delete_version(self, model: str, version: int, actor: str, reason: str = "") -> None:
        """Remove a version's record (audit ``version.delete``); RegistryConflictError while the
        alias or an active rollout names it, RegistryNotFoundError if it is not registered."""
        with self._write.begin() as session:
            row = q.version_row(session, model, version, lock=True)
            if row is None:
                raise RegistryNotFoundError(f"version {version} of model {model!r} is not registered")
            alias = session.get(AliasRow, model)
            rollout = q.active_rollout_row(session, model)
            if (alias is not None and str(version) in alias.weights) or (
                    rollout is not None and str(version) in rollout.variants):
                raise RegistryConflictError(f"{model} v{version} is live or in a rollout; it cannot be deleted")
            recorded = q.merge(None, version=version, state=row.state, artifact_uri=row.artifact_uri)
            session.delete(row)
            q.append_audit(session, self._clock(), q.text("actor", actor), "version.delete", model, reason, recorded)

    def set_version_state(
        self,
        model: str,
        version: int,
        state: VersionState | str,
        actor: str,
        reason: str = "",
        details: q.Details = None,
    ) -> VersionRecord:
        """Move a version to ``state`` (audit ``version.state`` with old and new state)."""
        new_state = q.parse_enum(VersionState, state, "version state")
        with self._write.begin() as session:
            row = q.version_row(session, model, version, lock=True)
            if row is None:
                raise RegistryNotFoundError(f"version {version} of model {model!r} is not registered")
            old_state, row.state = row.state, new_state.value
            recorded = q.merge(details, version=version, old_state=old_state, new_state=new_state.value)
            q.append_audit(session, self._clock(), q.text("actor", actor), "version.state", model, reason, recorded)
            return convert.version_record(row)

    # ---- aliases ---------------------------------------------------------------------------------

    def alias(self, model: str) -> AliasRecord | None:
        """The routing alias of ``model``, or None if it has none yet."""
        with self._read() as session:
            row = session.get(AliasRow, model)
            return None if row is None else convert.alias_record(row)

    def aliases(self) -> list[AliasRecord]:
        """All aliases, sorted by model."""
        with self._read() as session:
            return [convert.alias_record(row) for row in session.scalars(select(AliasRow).order_by(AliasRow.model))]

    def set_alias(
        self,
        model: str,
        weights: Mapping[int, float],
        sticky: str,
        actor: str,
        action: str,
        reason: str = "",
        details: q.Details = None,
    ) -> AliasRecord:
        """Route ``model`` by ``weights`` (version -> percent, adding up to 100) and bump its generation.

        Every version named must be registered (else RegistryNotFoundError). The audit entry, under
        the caller's ``action``, records ``old_weights`` (None for a new alias), ``new_weights``,
        ``old_sticky``, ``sticky`` and ``generation`` next to ``details``.
        """
        new_weights = validate_weights(weights)
        validate_sticky(sticky)
        q.text("actor", actor)
        q.text("action", action)
        with self._write.begin() as session:
            q.lock_model(session, model)
            q.require_versions(session, model, new_weights)
            row = session.get(AliasRow, model, with_for_update=True)
            old_weights = None if row is None else row.weights
            old_sticky = None if row is None else row.sticky
            stored = convert.weights_to_json(new_weights)
            now = self._clock()
            if row is None:
                row = AliasRow(model=model, weights=stored, sticky=sticky, generation=1, updated_at=now)
                session.add(row)
            else:
                row.weights, row.sticky, row.generation, row.updated_at = stored, sticky, row.generation + 1, now
            recorded = q.merge(
                details, old_weights=old_weights, new_weights=stored, old_sticky=old_sticky, sticky=sticky,
                generation=row.generation,
            )  # fmt: skip
            q.append_audit(session, now, actor, action, model, reason, recorded)
            return convert.alias_record(row)

    def routing_generation(self) -> int:
        """The sum of all alias generations: it changes whenever any alias changes (for pollers)."""
        with self._read() as session:
            return int(session.scalar(select(func.coalesce(func.sum(AliasRow.generation), 0))) or 0)

    # ---- deployments -----------------------------------------------------------------------------

    def deployment(self, model: str) -> DeploymentRecord | None:
        """Where ``model`` runs, or None if no deployment was set."""
        with self._read() as session:
            row = session.get(DeploymentRow, model)
            return None if row is None else convert.deployment_record(row)

    def set_deployment(
        self,
        model: str,
        pools: Iterable[str],
        instances: int,
        min_warm_replicas: int,
        actor: str,
        reason: str = "",
    ) -> DeploymentRecord:
        """Set the pools, Triton instance count and warm replicas of a registered model
        (audit ``deployment.set`` with the old and new values)."""
        pool_names = tuple(q.text("pool", pool) for pool in pools)
        if not pool_names or len(set(pool_names)) != len(pool_names):
            raise RegistryValidationError(f"pools must be a non-empty list of distinct names, got {pool_names}")
        q.count("instances", instances)
        q.count("min_warm_replicas", min_warm_replicas)
        with self._write.begin() as session:
            q.lock_model(session, model)
            row = session.get(DeploymentRow, model, with_for_update=True)
            old = None if row is None else q.deployment_values(row)
            if row is None:
                row = DeploymentRow(model=model)
                session.add(row)
            row.pools, row.instances, row.min_warm_replicas = list(pool_names), instances, min_warm_replicas
            row.updated_at = now = self._clock()
            recorded = q.merge(None, old=old, new=q.deployment_values(row))
            q.append_audit(session, now, q.text("actor", actor), "deployment.set", model, reason, recorded)
            return convert.deployment_record(row)

    # ---- rollouts --------------------------------------------------------------------------------

    def start_rollout(
        self,
        model: str,
        kind: str,
        baseline_version: int | None,
        variants: Mapping[int, float],
        sticky: str,
        thresholds: Mapping[str, float],
        actor: str,
        reason: str = "",
    ) -> RolloutRecord:
        """Record a new running rollout of ``model`` (audit ``rollout.start``).

        Only records it: the caller applies ``variants`` to the alias with ``set_alias``. Raises
        RegistryConflictError if the model already has a running or paused rollout, and
        RegistryNotFoundError if the model, the baseline or a variant version is not registered.
        """
        if kind not in ROLLOUT_KINDS:
            raise RegistryValidationError(f"rollout kind must be one of {', '.join(ROLLOUT_KINDS)}, got {kind!r}")
        checked_variants = validate_weights(variants)
        checked_thresholds = validate_thresholds(thresholds)
        validate_sticky(sticky)
        q.text("actor", actor)
        with self._write.begin() as session:
            q.lock_model(session, model)
            baseline = [] if baseline_version is None else [baseline_version]
            q.require_versions(session, model, [*checked_variants, *baseline])
            active = q.active_rollout_row(session, model)
            if active is not None:
                raise RegistryConflictError(f"model {model!r} already has an active rollout (id {active.id})")
            now = self._clock()
            row = RolloutRow(
                model=model, kind=kind, baseline_version=baseline_version,
                variants=convert.weights_to_json(checked_variants), sticky=sticky,
                status=RolloutStatus.RUNNING.value, thresholds=checked_thresholds, started_at=now, updated_at=now,
                started_by=actor,
            )  # fmt: skip
            session.add(row)
            q.flush_or_conflict(session, f"model {model!r} already has an active rollout")
            recorded = q.merge(
                None, rollout_id=row.id, kind=kind, baseline_version=baseline_version, variants=row.variants,
                sticky=sticky, thresholds=checked_thresholds,
            )  # fmt: skip
            q.append_audit(session, now, actor, "rollout.start", model, reason, recorded)
            return convert.rollout_record(row)

    def active_rollout(self, model: str) -> RolloutRecord | None:
        """The running or paused rollout of ``model``, if any."""
        with self._read() as session:
            row = q.active_rollout_row(session, model)
            return None if row is None else convert.rollout_record(row)

    def update_rollout(
        self,
        rollout_id: int,
        *,
        actor: str,
        action: str,
        status: RolloutStatus | str | None = None,
        variants: Mapping[int, float] | None = None,
        reason: str = "",
        details: q.Details = None,
    ) -> RolloutRecord:
        """Change an active rollout's status and/or variants (audit under ``action``).

        Raises RegistryNotFoundError for an unknown id or unregistered variant versions, and
        RegistryConflictError if the rollout already ended (promoted, rolled back or aborted).
        """
        new_status = None if status is None else q.parse_enum(RolloutStatus, status, "rollout status")
        new_variants = None if variants is None else validate_weights(variants)
        q.text("actor", actor)
        q.text("action", action)
        with self._write.begin() as session:
            row = session.get(RolloutRow, rollout_id, with_for_update=True)
            if row is None:
                raise RegistryNotFoundError(f"rollout {rollout_id} does not exist")
            if not RolloutStatus(row.status).active:
                raise RegistryConflictError(f"rollout {rollout_id} of model {row.model!r} already ended ({row.status})")
            old_status, old_variants = row.status, row.variants
            if new_variants is not None:
                q.require_versions(session, row.model, new_variants)
                row.variants = convert.weights_to_json(new_variants)
            if new_status is not None:
                row.status = new_status.value
            row.updated_at = now = self._clock()
            recorded = q.merge(
                details, rollout_id=rollout_id, old_status=old_status, status=row.status,
                old_variants=old_variants, variants=row.variants,
            )  # fmt: skip
            q.append_audit(session, now, actor, action, row.model, reason, recorded)
            return convert.rollout_record(row)

    def rollouts(self, model: str, limit: int = 20) -> list[RolloutRecord]:
        """The rollouts of ``model``, newest first, at most ``limit``."""
        query = select(RolloutRow).where(RolloutRow.model == model).order_by(RolloutRow.id.desc())
        with self._read() as session:
            return [convert.rollout_record(row) for row in session.scalars(query.limit(q.positive("limit", limit)))]

    # ---- audit log -------------------------------------------------------------------------------

    def audit(self, actor: str, action: str, subject: str, reason: str = "", details: q.Details = None) -> AuditEntry:
        """Append one audit entry that goes with no other change (e.g. a canary analysis verdict)."""
        with self._write.begin() as session:
            row = q.append_audit(session, self._clock(), actor, action, subject, reason, q.merge(details))
            return convert.audit_entry(row)

    def audit_log(
        self, subject: str | None = None, action_prefix: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """Audit entries, newest first, optionally only for ``subject`` and actions starting with
        ``action_prefix`` (e.g. ``"rollout."``), at most ``limit``."""
        query = select(AuditRow).order_by(AuditRow.id.desc()).limit(q.positive("limit", limit))
        if subject is not None:
            query = query.where(AuditRow.subject == subject)
        if action_prefix:
            query = query.where(AuditRow.action.startswith(action_prefix, autoescape=True))
        with self._read() as session:
            return [convert.audit_entry(row) for row in session.scalars(query)]
