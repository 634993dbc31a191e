"""Alembic environment of the registry, loaded programmatically by ``control.registry.database``.

The registry passes its own open connection (inside a transaction) as
``config.attributes["connection"]`` so that the migration runs with the registry's SQLite settings
and commits with it; without one (e.g. ``alembic -x`` from a shell with a config naming
``sqlalchemy.url``) a connection is made from the URL. Offline (``--sql``) mode is supported too.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from control.registry.schema import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("the registry's alembic config names no sqlalchemy.url and no connection")
    engine = create_engine(url)
    try:
        with engine.begin() as own:
            _configure(own)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
