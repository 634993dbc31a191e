"""control.artifacts.S3ArtifactStore against a real S3 endpoint (moto_server on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.artifacts import (
    ArtifactExistsError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    S3ArtifactStore,
    open_store,
)
from control.integrity import IntegrityError, TrustedKeys, verify_directory, write_signed_manifest
from tests.s3server import LocalS3Server

pytestmark = pytest.mark.integration

BUCKET = "shunter-artifacts"
BIG_BYTES = 9 * (1 << 20) + 123


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3Server]:
    with LocalS3Server() as server:
        yield server


@pytest.fixture
def store(s3: LocalS3Server, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> S3ArtifactStore:
    """A store built like production: credentials from the environment chain, endpoint from the URL."""
    for name, value in s3.credentials_env.items():
        monkeypatch.setenv(name, value)
    prefix = request.node.name.replace("[", "-").replace("]", "")
    built = open_store(f"s3://{BUCKET}/{prefix}?endpoint={s3.endpoint_url}")
    assert isinstance(built, S3ArtifactStore)
    built.ensure_bucket()
    return built


@pytest.fixture
def artifact(tmp_path: Path, signer: Ed25519PrivateKey) -> Path:
    root = tmp_path / "build"
    (root / "tokenizer").mkdir(parents=True)
    (root / "weights.bin").write_bytes(os.urandom(BIG_BYTES))
    (root / "config.json").write_text('{"layers": 2}')
    (root / "tokenizer" / "vocab.txt").write_text("hello\nworld\n")
    write_signed_manifest(root, "chat", 1, signer)
    return root


def _total(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def test_multipart_upload_and_download_verify_with_exact_progress(
    store: S3ArtifactStore, artifact: Path, tmp_path: Path, signer: Ed25519PrivateKey, s3: LocalS3Server
) -> None:
    sent: list[int] = []
    uri = store.upload_directory(artifact, "chat", 1, progress=sent.append)
    assert uri == store.uri_for("chat", 1) == f"s3://{BUCKET}/{store.prefix}/chat/1"
    assert sum(sent) == _total(artifact)
    head = s3.client().head_object(Bucket=BUCKET, Key=f"{store.prefix}/chat/1/weights.bin")
    assert head["ContentLength"] == BIG_BYTES
    assert head["ETag"].strip('"').endswith("-2"), "a file over 8 MiB goes up in 8 MiB parts"
    received: list[int] = []
    dest = store.download(uri, tmp_path / "fetched", progress=received.append)
    assert sum(received) == _total(artifact)
    manifest = verify_directory(dest, TrustedKeys([signer.public_key()]), model="chat", version=1)
    assert manifest.sizes["weights.bin"] == BIG_BYTES


def test_versions_are_immutable_and_listed(store: S3ArtifactStore, artifact: Path) -> None:
    assert store.list_versions("chat") == [] and not store.exists("chat", 1)
    for version in (12, 1, 3):
        store.upload_directory(artifact, "chat", version)
    assert store.list_versions("chat") == [1, 3, 12]
    assert store.exists("chat", 3) and not store.exists("chat", 2)
    with pytest.raises(ArtifactExistsError, match="chat v3"):
        store.upload_directory(artifact, "chat", 3)


def test_one_tampered_byte_in_s3_fails_verification_after_download(
    store: S3ArtifactStore, artifact: Path, tmp_path: Path, signer: Ed25519PrivateKey, s3: LocalS3Server
) -> None:
    uri = store.upload_directory(artifact, "chat", 1)
    data = bytearray((artifact / "weights.bin").read_bytes())
    data[BIG_BYTES // 2] ^= 0xFF
    s3.client().put_object(Bucket=BUCKET, Key=f"{store.prefix}/chat/1/weights.bin", Body=bytes(data))
    dest = store.download(uri, tmp_path / "fetched")
    with pytest.raises(IntegrityError) as caught:
        verify_directory(dest, TrustedKeys([signer.public_key()]), model="chat", version=1)
    assert (caught.value.code, caught.value.path) == ("digest_mismatch", "weights.bin")


def test_download_of_a_missing_version_is_not_found(store: S3ArtifactStore, tmp_path: Path) -> None:
    with pytest.raises(ArtifactNotFoundError):
        store.download(store.uri_for("chat", 99), tmp_path / "dest")


def test_missing_bucket_is_a_clear_store_error(s3: LocalS3Server, artifact: Path, tmp_path: Path) -> None:
    store = S3ArtifactStore("no-such-bucket", endpoint_url=s3.endpoint_url, client=s3.client())
    with pytest.raises(ArtifactStoreError, match="bucket 'no-such-bucket' does not exist"):
        store.upload_directory(artifact, "chat", 1)
    with pytest.raises(ArtifactStoreError, match="does not exist"):
        store.download(store.uri_for("chat", 1), tmp_path / "dest")
    with pytest.raises(ArtifactStoreError, match="does not exist"):
        store.list_versions("chat")


def test_unreachable_endpoint_is_a_clear_store_error(s3: LocalS3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in s3.credentials_env.items():
        monkeypatch.setenv(name, value)
    with LocalS3Server() as gone:
        endpoint = gone.endpoint_url
    store = S3ArtifactStore(BUCKET, endpoint_url=endpoint)
    with pytest.raises(ArtifactStoreError, match="cannot reach S3"):
        store.exists("chat", 1)
