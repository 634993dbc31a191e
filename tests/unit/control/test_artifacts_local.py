"""control.artifacts: the local directory store and artifact store URL parsing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.artifacts import (
    ArtifactExistsError,
    ArtifactNotFoundError,
    ArtifactStoreError,
    LocalArtifactStore,
    S3ArtifactStore,
    open_store,
)
from control.integrity import MANIFEST_NAME, SIGNATURE_NAME, TrustedKeys, verify_directory, write_signed_manifest


@pytest.fixture
def artifact(tmp_path: Path, signer: Ed25519PrivateKey) -> Path:
    root = tmp_path / "build"
    (root / "sub").mkdir(parents=True)
    (root / "weights.bin").write_bytes(os.urandom(2 * (1 << 20) + 5))
    (root / "sub" / "config.json").write_text("{}")
    write_signed_manifest(root, "embed", 1, signer)
    return root


def test_upload_then_download_gives_a_verified_copy(
    tmp_path: Path, artifact: Path, signer: Ed25519PrivateKey
) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    sent: list[int] = []
    uri = store.upload_directory(artifact, "embed", 1, progress=sent.append)
    assert uri == (tmp_path / "store" / "embed" / "1").resolve().as_uri()
    assert uri == store.uri_for("embed", 1)
    total = sum(p.stat().st_size for p in artifact.rglob("*") if p.is_file())
    assert sum(sent) == total
    received: list[int] = []
    dest = store.download(uri, tmp_path / "fetched" / "embed", progress=received.append)
    assert sum(received) == total
    assert (dest / SIGNATURE_NAME).exists() and (dest / MANIFEST_NAME).exists()
    manifest = verify_directory(dest, TrustedKeys([signer.public_key()]), model="embed", version=1)
    assert sorted(manifest.files) == ["sub/config.json", "weights.bin"]


def test_versions_are_immutable_and_listed_in_order(tmp_path: Path, artifact: Path) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    assert store.list_versions("embed") == []
    assert not store.exists("embed", 1)
    for version in (10, 2, 1):
        store.upload_directory(artifact, "embed", version)
    assert store.exists("embed", 2)
    assert store.list_versions("embed") == [1, 2, 10]
    before = (tmp_path / "store" / "embed" / "2" / "weights.bin").read_bytes()
    (artifact / "weights.bin").write_bytes(b"other")
    with pytest.raises(ArtifactExistsError, match="embed v2"):
        store.upload_directory(artifact, "embed", 2)
    assert (tmp_path / "store" / "embed" / "2" / "weights.bin").read_bytes() == before
    assert not [p for p in (tmp_path / "store" / "embed").iterdir() if p.name.startswith(".")]


def test_download_of_a_missing_version_is_not_found(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    with pytest.raises(ArtifactNotFoundError):
        store.download(store.uri_for("embed", 7), tmp_path / "dest")
    assert not (tmp_path / "dest").exists()


def test_download_refuses_a_uri_outside_the_store(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    with pytest.raises(ArtifactStoreError, match="outside this store"):
        store.download((tmp_path / "elsewhere").as_uri(), tmp_path / "dest")
    with pytest.raises(ArtifactStoreError, match="not a file://"):
        store.download("s3://bucket/embed/1", tmp_path / "dest")


def test_upload_refuses_symlinks_and_empty_directories(tmp_path: Path, artifact: Path) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactStoreError, match="no files"):
        store.upload_directory(tmp_path / "empty", "embed", 1)
    (artifact / "link").symlink_to(artifact / "weights.bin")
    with pytest.raises(ArtifactStoreError, match="not a regular file"):
        store.upload_directory(artifact, "embed", 1)
    assert not store.exists("embed", 1)


@pytest.mark.parametrize(("model", "version"), [("../etc", 1), ("a/b", 1), ("", 1), ("embed", -1), ("embed", True)])
def test_names_that_could_escape_the_layout_are_refused(tmp_path: Path, model: str, version: int) -> None:
    with pytest.raises(ValueError):
        LocalArtifactStore(tmp_path).uri_for(model, version)


def test_open_store_builds_local_stores_from_paths_and_file_urls(tmp_path: Path) -> None:
    from_path = open_store(str(tmp_path / "a"))
    from_url = open_store((tmp_path / "a").as_uri())
    assert isinstance(from_path, LocalArtifactStore) and isinstance(from_url, LocalArtifactStore)
    assert from_path.root == from_url.root == (tmp_path / "a").resolve()
    assert isinstance(open_store("relative/dir"), LocalArtifactStore)


def test_open_store_builds_s3_stores_with_endpoint_and_region() -> None:
    store = open_store("s3://models-bucket/team/prod?endpoint=http://127.0.0.1:9000&region=eu-west-1")
    assert isinstance(store, S3ArtifactStore)
    assert (store.bucket, store.prefix, store.endpoint_url, store.region) == (
        "models-bucket", "team/prod", "http://127.0.0.1:9000", "eu-west-1"
    )
    assert store.uri_for("chat", 4) == "s3://models-bucket/team/prod/chat/4"
    bare = open_store("s3://models-bucket")
    assert isinstance(bare, S3ArtifactStore)
    assert (bare.prefix, bare.endpoint_url, bare.region) == ("", None, "us-east-1")
    assert bare.uri_for("chat", 4) == "s3://models-bucket/chat/4"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("gs://bucket/x", "unsupported"),
        ("s3:///prefix", "no bucket"),
        ("s3://Bad_Bucket/x", "bucket name"),
        ("s3://bucket/x?endpoint=ftp://host", "http"),
        ("s3://bucket/x?endpoint=http://a&endpoint=http://b", "repeats"),
        ("s3://bucket/x?profile=dev", "unknown parameters"),
        ("file://remotehost/path", "file:///absolute/path"),
    ],
)
def test_open_store_rejects_malformed_urls_with_a_clear_message(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_store(url)
