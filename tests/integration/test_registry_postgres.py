"""The registry on a real PostgreSQL server: a throwaway cluster on a free 127.0.0.1 port.

Skipped when the PostgreSQL server binaries (``initdb``, ``pg_ctl``) or a Python driver (psycopg,
psycopg2 or pg8000) are missing. Run as root, the cluster belongs to the ``postgres`` user (initdb
refuses root). Only the server this test started is stopped, with ``pg_ctl stop -m fast``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from control.registry import Registry, RegistryConflictError, RuntimeRequirements
from control.registry.schema import Base

pytestmark = pytest.mark.integration

DRIVERS = (("psycopg", "postgresql+psycopg"), ("psycopg2", "postgresql+psycopg2"), ("pg8000", "postgresql+pg8000"))
CHAT = RuntimeRequirements(backend="python", kind="chat", gpu_types=("h100",))


def _postgres_bin() -> Path | None:
    """The folder holding initdb and pg_ctl (Debian keeps them off PATH, per major version)."""
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl and shutil.which("initdb"):
        return Path(pg_ctl).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _driver_scheme() -> str | None:
    return next((scheme for module, scheme in DRIVERS if importlib.util.find_spec(module)), None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(command: list[str], as_postgres: bool) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if as_postgres else []
    result = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stdout}{result.stderr}")


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """Start a temporary cluster (trust auth, 127.0.0.1 only) and yield a SQLAlchemy URL for it."""
    bin_dir, scheme = _postgres_bin(), _driver_scheme()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    if scheme is None:
        pytest.skip("no PostgreSQL driver for Python (psycopg, psycopg2 or pg8000) is installed")
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="shunter-registry-pg-"))
    data, port = root / "data", _free_port()
    if as_postgres:
        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
    pg_ctl = str(bin_dir / "pg_ctl")
    try:
        _run([str(bin_dir / "initdb"), "-D", str(data), "-U", "registry", "-A", "trust", "--no-sync"], as_postgres)
        options = f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off"
        _run([pg_ctl, "start", "-D", str(data), "-w", "-t", "60", "-l", str(root / "log"), "-o", options], as_postgres)
        try:
            yield f"{scheme}://registry@127.0.0.1:{port}/postgres"
        finally:
            _run([pg_ctl, "stop", "-D", str(data), "-m", "fast", "-w"], as_postgres)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_registry_round_trip_on_postgresql(postgres_url: str) -> None:
    with Registry.open(postgres_url) as registry:
        registry.migrate()  # a second upgrade is a no-op
        registry.register_version("chat", 1, "s3://m/chat/1", "sha256:01", "key", CHAT, "alice")
        registry.register_version("chat", 2, "s3://m/chat/2", "sha256:02", "key", CHAT, "alice")
        with pytest.raises(RegistryConflictError):
            registry.register_version("chat", 2, "s3://m/chat/2", "sha256:02", "key", CHAT, "alice")
        registry.set_alias("chat", {1: 100.0}, "request", "alice", "alias.set")
        alias = registry.set_alias("chat", {1: 90.0, 2: 10.0}, "tenant", "ops", "rollout.step", details={"step": 1})
        assert (alias.weights, alias.generation) == ({1: 90.0, 2: 10.0}, 2)
        rollout = registry.start_rollout("chat", "canary", 1, {1: 90.0, 2: 10.0}, "tenant", {"p99_ms": 800}, "ops")
        with pytest.raises(RegistryConflictError):
            registry.start_rollout("chat", "ab", None, {1: 50.0, 2: 50.0}, "tenant", {}, "ops")
        registry.update_rollout(rollout.id, actor="ops", action="rollout.promote", status="promoted")
        with Registry(postgres_url) as other:
            assert other.alias("chat") == alias
            assert other.routing_generation() == 2
        entry = registry.audit_log(subject="chat", action_prefix="rollout.step")[0]
        assert entry.details["old_weights"] == {"1": 100.0}
        assert entry.details["new_weights"] == {"1": 90.0, "2": 10.0}
        actions = [e.action for e in registry.audit_log()]
    assert actions[-3:] == ["version.register", "version.register", "model.create"]

    engine = create_engine(postgres_url)
    try:
        for statement in ("UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log", "TRUNCATE audit_log"):
            with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
                connection.execute(text(statement))
        with engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        engine.dispose()
