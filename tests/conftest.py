"""Shared fixtures: the project's paths, the artifacts that `make setup` built, a signing key."""

from __future__ import annotations

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
