"""The alembic migrations: idempotent, matching schema.py, and an append-only audit log."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, make_url, text
from sqlalchemy.exc import IntegrityError

from control.registry import Registry
from control.registry.database import current_revision
from control.registry.schema import Base
from tests.unit.control.registry.support import register


def sqlite_path(url: str) -> Path:
    database = make_url(url).database
    assert database
    return Path(database)


def test_migrate_creates_the_folder_and_every_table(db_url: str) -> None:
    assert not sqlite_path(db_url).parent.exists()
    with Registry.open(db_url) as registry:
        assert registry.models() == []
    engine = create_engine(db_url)
    try:
        tables = set(inspect(engine).get_table_names())
        assert {"models", "model_versions", "aliases", "deployments", "rollouts", "audit_log",
                "capacity_bounds", "capacity_overrides", "operator_tokens"} <= tables
        assert current_revision(engine) == "0003"
    finally:
        engine.dispose()


def test_migrating_twice_is_a_no_op_and_keeps_the_data(db_url: str) -> None:
    with Registry.open(db_url) as registry:
        register(registry)
        registry.migrate()
        registry.migrate()
    with Registry.open(db_url) as reopened:
        assert [v.version for v in reopened.versions("chat")] == [1]
        assert len(reopened.audit_log()) == 2  # model.create + version.register, nothing added by migrate


def test_the_migration_matches_the_orm_schema(registry: Registry, db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_the_database_uses_wal_and_enforces_foreign_keys(registry: Registry, db_url: str) -> None:
    with sqlite3.connect(sqlite_path(db_url)) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    engine = registry._engine  # white-box: the pragma is per connection
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


@pytest.mark.parametrize(
    "statement",
    ["UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log", "DELETE FROM audit_log WHERE id = 1"],
)
def test_raw_sql_cannot_change_the_audit_log(registry: Registry, db_url: str, statement: str) -> None:
    register(registry)
    before = registry.audit_log()
    with sqlite3.connect(sqlite_path(db_url)) as raw, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(statement)
    engine = create_engine(db_url)
    try:
        with pytest.raises(IntegrityError, match="append-only"), engine.begin() as connection:
            connection.execute(text(statement))
    finally:
        engine.dispose()
    assert registry.audit_log() == before


def test_the_audit_log_still_accepts_inserts_through_raw_sql(registry: Registry, db_url: str) -> None:
    with sqlite3.connect(sqlite_path(db_url)) as raw:
        raw.execute(
            "INSERT INTO audit_log (at, actor, action, subject, reason, details) "
            "VALUES (1.0, 'ops', 'note', 'chat', '', '{}')"
        )
    assert [entry.action for entry in registry.audit_log()] == ["note"]
