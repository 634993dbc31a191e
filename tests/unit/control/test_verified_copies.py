"""control.verified_copies and Deployer.stage: an artifact is downloaded and verified once per
manifest digest, on a real local store and a real SQLite registry; tampering is still refused."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.artifacts import LocalArtifactStore, Progress
from control.deployer import Deployer, DeployError
from control.integrity import (
    MANIFEST_NAME,
    IntegrityError,
    Manifest,
    TrustedKeyDirectory,
    generate_keypair,
    load_private_key,
    write_signed_manifest,
)
from control.registry import Registry, RuntimeRequirements, VersionState
from control.verified_copies import VerifiedCopies
from settings.control import RolloutSettings
from settings.stack import StackConfig, TritonSettings

MODEL = "embed"
REQUIREMENTS = RuntimeRequirements(backend="python", kind="embedding")


class CountingStore(LocalArtifactStore):
    """The local directory store, counting the downloads it serves."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.downloads = 0

    def download(self, uri: str, dest_dir: Path, progress: Progress | None = None) -> Path:
        self.downloads += 1
        return super().download(uri, dest_dir, progress)


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(tmp_path / "store")


@pytest.fixture
def copies(tmp_path: Path, store: CountingStore, signer: Ed25519PrivateKey) -> VerifiedCopies:
    trusted_dir = tmp_path / "trusted"
    trusted_dir.mkdir()
    (trusted_dir / "signer.pub").write_bytes(signer.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return VerifiedCopies(tmp_path / "verified", store, TrustedKeyDirectory(trusted_dir))


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    opened = Registry.open(f"sqlite:///{tmp_path / 'registry.db'}")
    yield opened
    opened.close()


def deployer_of(registry: Registry, copies: VerifiedCopies, tmp_path: Path) -> Deployer:
    config = StackConfig(triton=TritonSettings(), pools=(), models=())
    return Deployer(registry, copies, config, tmp_path / "repository", [], RolloutSettings())


def build(tmp_path: Path, signer: Ed25519PrivateKey, version: int, weights: bytes = b"w" * 4096) -> Path:
    root = tmp_path / f"build-{version}-{hashlib.sha256(weights).hexdigest()[:8]}"
    (root / "sub").mkdir(parents=True)
    (root / "weights.bin").write_bytes(weights)
    (root / "sub" / "config.json").write_text('{"dim": 8}')
    write_signed_manifest(root, MODEL, version, signer)
    return root


def push(store: CountingStore, registry: Registry, artifact: Path, version: int) -> str:
    """Upload and register (the manifest digest as `shunter models push` computes it)."""
    uri = store.upload_directory(artifact, MODEL, version)
    digest = Manifest.from_bytes((artifact / MANIFEST_NAME).read_bytes()).digest()
    registry.register_version(MODEL, version, uri, digest, "key", REQUIREMENTS, "test")
    return digest


def test_a_version_verified_at_registration_is_staged_without_a_second_download(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry, verifications: list[Path]) -> None:
    uri = store.upload_directory(build(tmp_path, signer, 1), MODEL, 1)
    verified = copies.fetch(uri, MODEL, 1)  # what the admin API's register_version does
    registry.register_version(MODEL, 1, uri, verified.digest, verified.signer_key_id, REQUIREMENTS, "test")
    deployer = deployer_of(registry, copies, tmp_path)
    assert deployer.stage(MODEL, 1) == verified.path == tmp_path / "verified" / verified.digest
    assert deployer.stage(MODEL, 1) == verified.path
    assert (store.downloads, len(verifications)) == (1, 1)
    record = registry.version(MODEL, 1)
    assert record is not None and record.state is VersionState.VERIFIED
    assert record.signer_key_id == verified.signer_key_id != ""


def test_a_second_stage_of_the_same_digest_reads_nothing_from_the_store(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry, verifications: list[Path]) -> None:
    digest = push(store, registry, build(tmp_path, signer, 1), 1)
    first = deployer_of(registry, copies, tmp_path).stage(MODEL, 1)
    assert (store.downloads, len(verifications)) == (1, 1)
    restarted = VerifiedCopies(tmp_path / "verified", store, copies.trusted)  # a new control process
    assert deployer_of(registry, restarted, tmp_path).stage(MODEL, 1) == first
    assert (store.downloads, len(verifications)) == (1, 1)
    assert sorted(p.name for p in (tmp_path / "verified").iterdir()) == [digest]  # no temporary left
    files = [p for p in first.rglob("*") if p.is_file()]
    assert files and all(not p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for p in files)


def test_a_tampered_store_object_is_refused_naming_both_file_digests(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry) -> None:
    artifact = build(tmp_path, signer, 1)
    push(store, registry, artifact, 1)
    stored = tmp_path / "store" / MODEL / "1" / "weights.bin"
    tampered = bytearray(stored.read_bytes())
    tampered[100] ^= 0x01
    stored.write_bytes(bytes(tampered))
    with pytest.raises(DeployError) as caught:
        deployer_of(registry, copies, tmp_path).stage(MODEL, 1)
    assert caught.value.code == "digest_mismatch"
    assert hashlib.sha256(bytes(tampered)).hexdigest() in str(caught.value)
    assert hashlib.sha256((artifact / "weights.bin").read_bytes()).hexdigest() in str(caught.value)
    record = registry.version(MODEL, 1)
    assert record is not None and record.state is VersionState.FAILED
    assert list((tmp_path / "verified").iterdir()) == []


def test_a_store_object_re_signed_with_another_manifest_is_refused_naming_both_manifest_digests(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry) -> None:
    recorded = push(store, registry, build(tmp_path, signer, 1), 1)
    replacement = build(tmp_path, signer, 1, weights=b"other weights, signed by a trusted key")
    target = tmp_path / "store" / MODEL / "1"
    shutil.rmtree(target)
    shutil.copytree(replacement, target)
    other = Manifest.from_bytes((replacement / MANIFEST_NAME).read_bytes()).digest()
    with pytest.raises(DeployError) as caught:
        deployer_of(registry, copies, tmp_path).stage(MODEL, 1)
    assert caught.value.code == "digest_mismatch"
    assert recorded in str(caught.value) and other in str(caught.value)
    assert list((tmp_path / "verified").iterdir()) == []


def test_an_untrusted_artifact_is_refused_at_registration_and_leaves_nothing(
        tmp_path: Path, store: CountingStore, copies: VerifiedCopies) -> None:
    stranger = Ed25519PrivateKey.generate()
    uri = store.upload_directory(build(tmp_path, stranger, 1), MODEL, 1)
    with pytest.raises(IntegrityError) as caught:
        copies.fetch(uri, MODEL, 1)
    assert caught.value.code == "untrusted_key"
    assert list((tmp_path / "verified").iterdir()) == []


def test_a_damaged_verified_copy_is_downloaded_and_verified_again(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry, verifications: list[Path]) -> None:
    push(store, registry, build(tmp_path, signer, 1), 1)
    deployer = deployer_of(registry, copies, tmp_path)
    path = deployer.stage(MODEL, 1)
    manifest = path / MANIFEST_NAME
    manifest.chmod(0o644)
    manifest.write_bytes(b"{}")
    assert deployer.stage(MODEL, 1) == path
    assert (store.downloads, len(verifications)) == (2, 2)
    assert Manifest.from_bytes(manifest.read_bytes()).digest() == path.name


def test_two_fetches_of_one_version_keep_one_copy(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies) -> None:
    uri = store.upload_directory(build(tmp_path, signer, 1), MODEL, 1)
    first, second = copies.fetch(uri, MODEL, 1), copies.fetch(uri, MODEL, 1)
    assert first.path == second.path and first.digest == second.digest
    assert [p.name for p in (tmp_path / "verified").iterdir()] == [first.digest]


def test_a_recorded_digest_that_is_not_a_sha256_is_refused_before_any_path_is_made(
        tmp_path: Path, signer: Ed25519PrivateKey, store: CountingStore, copies: VerifiedCopies,
        registry: Registry) -> None:
    uri = store.upload_directory(build(tmp_path, signer, 1), MODEL, 1)
    registry.register_version(MODEL, 1, uri, "../../escape", "key", REQUIREMENTS, "test")
    with pytest.raises(DeployError) as caught:
        deployer_of(registry, copies, tmp_path).stage(MODEL, 1)
    assert caught.value.code == "bad_manifest" and store.downloads == 0
    assert not os.path.exists(tmp_path / "escape")


def test_a_key_trusted_after_start_is_accepted_and_an_untrusted_one_refused_without_a_restart(
        tmp_path: Path, store: CountingStore, copies: VerifiedCopies) -> None:
    generate_keypair(tmp_path / "keys" / "late.key", tmp_path / "keys" / "late.pub")
    late = load_private_key(tmp_path / "keys" / "late.key")
    uri = store.upload_directory(build(tmp_path, late, 2), MODEL, 2)
    with pytest.raises(IntegrityError) as refused:
        copies.fetch(uri, MODEL, 2)
    assert refused.value.code == "untrusted_key"
    shutil.copyfile(tmp_path / "keys" / "late.pub", copies.trusted.directory / "late.pub")  # keys generate --trust
    assert copies.fetch(uri, MODEL, 2).manifest.version == 2
    (copies.trusted.directory / "late.pub").unlink()  # keys untrust
    with pytest.raises(IntegrityError) as untrusted:
        VerifiedCopies(tmp_path / "verified-2", store, copies.trusted).fetch(uri, MODEL, 2)
    assert untrusted.value.code == "untrusted_key"


def test_a_version_no_pool_can_run_is_refused_before_it_is_staged(
        registry: Registry, copies: VerifiedCopies, tmp_path: Path) -> None:
    from scheduling.capacity import CapacityProfile
    from settings.stack import ModelSpec, PoolSpec

    config = StackConfig(triton=TritonSettings(), models=(ModelSpec(name=MODEL, kind="embedding"),),
                         pools=(PoolSpec(name="small", gpu_type="a10", models=(MODEL,)),
                                PoolSpec(name="big", gpu_type="h100", models=(MODEL,), base_port=9200)))
    profiles = {"a10": CapacityProfile("a10", 24, 1000, 512, 1000.0, 50.0, 1.0),
                "h100": CapacityProfile("h100", 80, 1000, 512, 1000.0, 50.0, 4.0)}
    deployer = Deployer(registry, copies, config, tmp_path / "repository", [], RolloutSettings(), profiles=profiles)
    deployer.check_requirements(MODEL, 2, RuntimeRequirements("python", "embedding", min_gpu_memory_gb=40))  # h100
    with pytest.raises(DeployError) as refused:
        deployer.check_requirements(MODEL, 3, RuntimeRequirements("python", "embedding", min_gpu_memory_gb=100))
    assert refused.value.code == "requirements_unmet"
    assert "pool small: needs 100 GB of GPU memory, has 24; pool big: needs 100 GB of GPU memory, has 80" in str(
        refused.value)
