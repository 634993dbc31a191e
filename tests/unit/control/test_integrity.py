"""control.integrity: each refusal reproduced on a real signed directory."""

from __future__ import annotations

import base64
import json
import os
import pickle
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.integrity import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    IntegrityError,
    Manifest,
    TrustedKeys,
    build_manifest,
    generate_keypair,
    key_id,
    load_private_key,
    load_trusted_keys,
    sign_manifest,
    verify_directory,
    write_signed_manifest,
)


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Ed25519PrivateKey, TrustedKeys]:
    generate_keypair(tmp_path / "keys" / "signer.key", tmp_path / "keys" / "signer.pem")
    return load_private_key(tmp_path / "keys" / "signer.key"), load_trusted_keys(tmp_path / "keys")


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    root = tmp_path / "artifact"
    (root / "tokenizer").mkdir(parents=True)
    (root / "weights.bin").write_bytes(os.urandom(3 * (1 << 20) + 17))
    (root / "config.json").write_text('{"hidden": 64}')
    (root / "tokenizer" / "vocab.txt").write_text("a\nb\n")
    (root / "empty.txt").write_bytes(b"")
    return root


@pytest.fixture
def signed(artifact: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> Path:
    write_signed_manifest(artifact, "chat", 3, keys[0])
    return artifact


def _code(directory: Path, trusted: TrustedKeys, **expected: object) -> IntegrityError:
    with pytest.raises(IntegrityError) as caught:
        verify_directory(directory, trusted, **expected)  # type: ignore[arg-type]
    return caught.value


def test_signed_directory_verifies_and_lists_every_file(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    manifest = verify_directory(signed, keys[1], model="chat", version=3)
    assert sorted(manifest.files) == ["config.json", "empty.txt", "tokenizer/vocab.txt", "weights.bin"]
    assert manifest.sizes["weights.bin"] == 3 * (1 << 20) + 17
    listed = [p for p in signed.rglob("*") if p.is_file() and p.name not in (MANIFEST_NAME, SIGNATURE_NAME)]
    assert manifest.total_bytes == sum(p.stat().st_size for p in listed)
    assert manifest == build_manifest(signed, "chat", 3)


def test_manifest_bytes_are_canonical_and_round_trip(signed: Path) -> None:
    data = (signed / MANIFEST_NAME).read_bytes()
    manifest = Manifest.from_bytes(data)
    assert manifest.to_bytes() == data
    assert b" " not in data and b"\n" not in data
    reordered = json.dumps(json.loads(data), indent=2).encode()
    assert Manifest.from_bytes(reordered).digest() == manifest.digest()


def test_private_key_file_is_owner_only_and_not_overwritten(tmp_path: Path) -> None:
    kid = generate_keypair(tmp_path / "a.key", tmp_path / "a.pem")
    assert stat.S_IMODE((tmp_path / "a.key").stat().st_mode) == 0o600
    assert kid == key_id(load_private_key(tmp_path / "a.key").public_key())
    assert list(load_trusted_keys([tmp_path / "a.pem"])) == [kid]
    with pytest.raises(FileExistsError):
        generate_keypair(tmp_path / "a.key", tmp_path / "b.pem")


def test_one_changed_byte_is_a_digest_mismatch_naming_the_file(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    weights = signed / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    error = _code(signed, keys[1])
    assert (error.code, error.path) == ("digest_mismatch", "weights.bin")
    assert "weights.bin" in str(error)


def test_changed_length_is_a_size_mismatch(signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> None:
    with (signed / "config.json").open("ab") as handle:
        handle.write(b" ")
    error = _code(signed, keys[1])
    assert (error.code, error.path) == ("size_mismatch", "config.json")


def test_signature_by_a_key_outside_the_trusted_set_is_untrusted(
    signed: Path, tmp_path: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    other = Ed25519PrivateKey.generate()
    write_signed_manifest(signed, "chat", 3, other)
    error = _code(signed, keys[1])
    assert error.code == "untrusted_key"
    assert key_id(other.public_key()) in str(error)


def test_forged_manifest_under_a_trusted_key_id_is_a_bad_signature(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    trusted_kid = key_id(keys[0].public_key())
    (signed / "weights.bin").write_bytes(b"malicious weights")
    forged = build_manifest(signed, "chat", 3)
    (signed / MANIFEST_NAME).write_bytes(forged.to_bytes())
    forged_signature = Ed25519PrivateKey.generate().sign(forged.to_bytes())
    body = {"key_id": trusted_kid, "algorithm": "ed25519", "signature": base64.b64encode(forged_signature).decode()}
    (signed / SIGNATURE_NAME).write_text(json.dumps(body))
    assert _code(signed, keys[1]).code == "bad_signature"


def test_manifest_edited_after_signing_is_a_bad_signature(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    manifest = Manifest.from_bytes((signed / MANIFEST_NAME).read_bytes())
    edited = Manifest(manifest.model, manifest.version + 1, manifest.files, manifest.sizes)
    (signed / MANIFEST_NAME).write_bytes(edited.to_bytes())
    assert _code(signed, keys[1]).code == "bad_signature"


def test_deleted_file_is_missing(signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> None:
    (signed / "tokenizer" / "vocab.txt").unlink()
    error = _code(signed, keys[1])
    assert (error.code, error.path) == ("missing_file", "tokenizer/vocab.txt")


def test_extra_file_is_unexpected(signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> None:
    (signed / "tokenizer" / "extra.py").write_text("import os\n")
    error = _code(signed, keys[1])
    assert (error.code, error.path) == ("unexpected_file", "tokenizer/extra.py")


@pytest.mark.parametrize("removed", [SIGNATURE_NAME, MANIFEST_NAME])
def test_missing_signature_or_manifest_is_unsigned(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys], removed: str
) -> None:
    (signed / removed).unlink()
    assert _code(signed, keys[1]).code == "unsigned"


def test_never_signed_directory_is_unsigned(artifact: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> None:
    assert _code(artifact, keys[1]).code == "unsigned"


@pytest.mark.parametrize(("model", "version"), [("embed", 3), ("chat", 4), ("embed", None)])
def test_manifest_for_another_model_or_version_is_refused(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys], model: str, version: int | None
) -> None:
    error = _code(signed, keys[1], model=model, version=version)
    assert error.code == "wrong_model"
    assert "chat v3" in str(error)


def test_signature_is_checked_before_any_file_is_read(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    (signed / "weights.bin").unlink()
    stranger = Ed25519PrivateKey.generate()
    (signed / SIGNATURE_NAME).write_bytes(sign_manifest(build_manifest(signed, "chat", 3), stranger))
    assert _code(signed, keys[1]).code == "untrusted_key"


def test_malformed_signed_manifest_is_a_bad_manifest(
    signed: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]
) -> None:
    data = json.dumps({"schema": 1, "model": "chat", "version": 3, "files": {"../etc/passwd": "0" * 64},
                       "sizes": {"../etc/passwd": 1}}).encode()
    (signed / MANIFEST_NAME).write_bytes(data)
    body = {"key_id": key_id(keys[0].public_key()), "algorithm": "ed25519",
            "signature": base64.b64encode(keys[0].sign(data)).decode()}
    (signed / SIGNATURE_NAME).write_text(json.dumps(body))
    error = _code(signed, keys[1])
    assert (error.code, error.path) == ("bad_manifest", "../etc/passwd")


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[]", b'{"schema":1,"model":"chat","version":-1,"files":{},"sizes":{}}',
     b'{"schema":1,"model":"chat","version":1,"files":{"a":"xyz"},"sizes":{"a":1}}',
     b'{"schema":1,"model":"chat","version":1,"files":{"a":"' + b"0" * 64 + b'"},"sizes":{}}'],
)
def test_from_bytes_rejects_bad_shapes(data: bytes) -> None:
    with pytest.raises(IntegrityError) as caught:
        Manifest.from_bytes(data)
    assert caught.value.code == "bad_manifest"


def test_symlink_in_the_artifact_is_refused(artifact: Path, keys: tuple[Ed25519PrivateKey, TrustedKeys]) -> None:
    (artifact / "link.bin").symlink_to(artifact / "weights.bin")
    with pytest.raises(IntegrityError) as caught:
        write_signed_manifest(artifact, "chat", 3, keys[0])
    assert (caught.value.code, caught.value.path) == ("bad_artifact", "link.bin")


def test_trusted_keys_refuse_a_directory_without_keys_and_a_non_key(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(IntegrityError) as caught:
        load_trusted_keys(tmp_path / "empty")
    assert caught.value.code == "bad_key"
    (tmp_path / "junk.pem").write_text("not a key")
    with pytest.raises(IntegrityError) as caught:
        load_trusted_keys(tmp_path / "junk.pem")
    assert caught.value.code == "bad_key"


def test_integrity_error_survives_pickling() -> None:
    error = pickle.loads(pickle.dumps(IntegrityError("missing_file", "a.bin is missing", "a.bin")))
    assert (error.code, str(error), error.path) == ("missing_file", "a.bin is missing", "a.bin")
