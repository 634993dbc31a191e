"""Engines and migrations for the registry's database (a SQLite file by default, or PostgreSQL).

SQLite is set up for two threads of one process (the control API and the scheduler) and for several
processes on one file: WAL journal, a busy timeout, foreign keys on, and ``check_same_thread``
off. The driver's own transaction handling is turned off so that SQLAlchemy's ``begin`` emits the
``BEGIN`` itself: ``BEGIN IMMEDIATE`` for writes (taking the write lock up front, so that a
read-then-write transaction waits for another writer instead of failing) and a plain ``BEGIN`` for
reads, which in WAL mode never block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.pool import StaticPool

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Execution option read by the SQLite ``begin`` hook: "DEFERRED" (default) or "IMMEDIATE".
SQLITE_BEGIN_OPTION = "shunter_sqlite_begin"


def is_memory_sqlite(url: URL) -> bool:
    """True for an in-memory SQLite URL (no file behind it)."""
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and (database in ("", ":memory:") or "mode=memory" in database)


def create_registry_engine(url: str | URL) -> Engine:
    """An engine for ``url`` with the registry's settings; connecting is deferred to first use."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    extra: dict[str, Any] = {"poolclass": StaticPool} if is_memory_sqlite(parsed) else {}
    engine = create_engine(
        parsed, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **extra
    )
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def writer(engine: Engine) -> Engine:
    """``engine`` (sharing its pool) whose transactions take SQLite's write lock when they begin."""
    if engine.dialect.name != "sqlite":
        return engine
    return engine.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy's begin hook emits BEGIN itself
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def ensure_sqlite_parent_dir(url: URL) -> None:
    """Create the folder of a SQLite file URL if it is missing (no-op for other databases)."""
    if url.get_backend_name() != "sqlite" or is_memory_sqlite(url) or not url.database:
        return
    database = url.database.removeprefix("file:").split("?", 1)[0]
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def alembic_config(url: URL) -> Config:
    """An alembic config for the registry's migrations built in code (no alembic.ini)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.render_as_string(hide_password=False).replace("%", "%%"))
    return config


def upgrade_to_head(engine: Engine) -> None:
    """Run every pending migration in one transaction; a no-op on an up-to-date database.

    Safe against a concurrent ``upgrade_to_head`` on the same SQLite file: the write lock is taken
    before alembic reads its version table.
    """
    ensure_sqlite_parent_dir(engine.url)
    config = alembic_config(engine.url)
    with writer(engine).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None before the first migration)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
