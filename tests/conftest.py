"""Shared fixtures: the project's paths, the artifacts that `make setup` built, a signing key, a
Redis server."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from settings.paths import StackPaths

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def stack_paths() -> StackPaths:
    return StackPaths()


@pytest.fixture(scope="session")
def artifacts_dir(stack_paths: StackPaths) -> Path:
    path = stack_paths.artifacts
    if not (path / "chat" / ".complete").exists():
        pytest.fail("model artifacts are missing: run `make setup` first")
    return path


@pytest.fixture
def signer() -> Ed25519PrivateKey:
    """A fresh ed25519 key that signs artifact manifests in the tests."""
    return Ed25519PrivateKey.generate()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``redis-server`` of this session's own on a free loopback port (no persistence, its log in a
    temporary folder), stopped at the end; fails if it is missing (``make setup`` installs it) or
    does not answer PING within 10 s."""
    from control.redis_server import LocalRedis, RedisStartError  # only for the sessions that use Redis

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = LocalRedis(port, tmp_path_factory.mktemp("redis"), ready_timeout_s=10.0)
    try:
        server.start()
    except RedisStartError as exc:
        pytest.fail(f"cannot start the tests' redis-server: {exc}")
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.stop()
