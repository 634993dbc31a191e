"""Artifact integrity: a SHA-256 manifest of every file, signed with ed25519.

Contract. An artifact directory holds the model files plus ``shunter-manifest.json`` (canonical
JSON: model, version, and per relative POSIX path its sha256 hex digest and size in bytes) and
``shunter-manifest.sig`` (JSON: key id, algorithm ``ed25519``, base64 signature over the manifest
file's exact bytes). ``write_signed_manifest`` produces both; ``verify_directory`` accepts a
directory only if, in this order: both files exist, the signing key is one of the trusted keys,
the signature verifies, the manifest parses, it names the expected model and version, and the
directory holds exactly the listed files with the listed sizes and digests. Every refusal is an
``IntegrityError`` whose ``code`` is one of ``IntegrityCode`` and whose message says what is wrong
and where. The signature is checked before any model file is read, so an unsigned or forged
manifest never steers what gets hashed. Symlinks and other non-regular files are refused
(``bad_artifact``): what is verified is what is served.

A key id is the first 16 hex digits of the sha256 of the raw 32-byte public key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from control.errors import ControlError

MANIFEST_NAME = "shunter-manifest.json"
SIGNATURE_NAME = "shunter-manifest.sig"
ALGORITHM = "ed25519"
MANIFEST_SCHEMA = 1
CHUNK_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 64 << 20
PUBLIC_KEY_SUFFIXES = (".pem", ".pub")

IntegrityCode = Literal[
    "unsigned",
    "untrusted_key",
    "bad_signature",
    "bad_manifest",
    "wrong_model",
    "missing_file",
    "digest_mismatch",
    "size_mismatch",
    "unexpected_file",
    "bad_artifact",
    "bad_key",
]

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_RESERVED = frozenset({MANIFEST_NAME, SIGNATURE_NAME})


class IntegrityError(ControlError):
    """An artifact or key failed a check; ``code`` says which, ``path`` names the file if any."""

    def __init__(self, code: IntegrityCode, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.code: IntegrityCode = code
        self.path = path

    def __reduce__(self) -> tuple[type[IntegrityError], tuple[IntegrityCode, str, str | None]]:
        return (IntegrityError, (self.code, str(self), self.path))


@dataclass(frozen=True)
class Manifest:
    """What an artifact version holds: relative POSIX path -> sha256 hex, and -> size in bytes."""

    model: str
    version: int
    files: dict[str, str]
    sizes: dict[str, int]

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces, ASCII): the exact bytes that get signed."""
        body = {
            "schema": MANIFEST_SCHEMA,
            "model": self.model,
            "version": self.version,
            "files": self.files,
            "sizes": self.sizes,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        """Parse and validate a manifest; raises ``IntegrityError('bad_manifest')`` on any bad shape."""
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME} is not valid JSON: {exc}") from exc
        if not isinstance(body, dict) or set(body) != {"schema", "model", "version", "files", "sizes"}:
            fields = "schema, model, version, files, sizes"
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME} must hold exactly {fields}")
        if body["schema"] != MANIFEST_SCHEMA:
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME} has unsupported schema {body['schema']!r}")
        model, version, files, sizes = body["model"], body["version"], body["files"], body["sizes"]
        if not isinstance(model, str) or not model:
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: model must be a non-empty string")
        if not _is_count(version):
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: version must be a non-negative integer")
        _check_entries(files, sizes)
        return cls(model=model, version=version, files=dict(files), sizes=dict(sizes))

    def digest(self) -> str:
        """sha256 hex of ``to_bytes()``."""
        return hashlib.sha256(self.to_bytes()).hexdigest()

    @property
    def total_bytes(self) -> int:
        """Sum of the listed file sizes."""
        return sum(self.sizes.values())


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_entries(files: Any, sizes: Any) -> None:
    if not isinstance(files, dict) or not isinstance(sizes, dict):
        raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: files and sizes must be objects")
    if set(files) != set(sizes):
        raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: files and sizes must list the same paths")
    for path, digest in files.items():
        if not _is_safe_relpath(path):
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: unsafe path {path!r}", path)
        if not isinstance(digest, str) or not _DIGEST.match(digest):
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: {path} has no sha256 hex digest", path)
        if not _is_count(sizes[path]):
            raise IntegrityError("bad_manifest", f"{MANIFEST_NAME}: {path} has no valid size", path)


def _is_safe_relpath(path: Any) -> bool:
    """A relative POSIX path that stays inside its directory and is not a reserved name."""
    if not isinstance(path, str) or not path or "\\" in path or "\x00" in path or path in _RESERVED:
        return False
    parts = PurePosixPath(path).parts
    return not path.startswith("/") and "/".join(parts) == path and all(p not in ("", ".", "..") for p in parts)


def _walk(directory: Path) -> Iterator[tuple[str, Path]]:
    """(relative POSIX path, path) of every regular file below ``directory``, sorted, manifest and
    signature excluded; raises ``bad_artifact`` on a symlink or a special file."""
    entries: list[tuple[str, Path]] = []
    for root, dirnames, filenames in os.walk(directory, followlinks=False):
        for name in dirnames + filenames:
            path = Path(root) / name
            rel = path.relative_to(directory).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise IntegrityError("bad_artifact", f"{rel} is a symlink; artifacts must hold regular files only", rel)
            if name in filenames and not stat.S_ISREG(mode):
                raise IntegrityError("bad_artifact", f"{rel} is not a regular file", rel)
            if name in filenames and rel not in _RESERVED:
                entries.append((rel, path))
    yield from sorted(entries)


def _hash_file(path: Path) -> tuple[str, int]:
    """(sha256 hex, size in bytes) of the bytes read, in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def build_manifest(directory: Path | str, model: str, version: int) -> Manifest:
    """Hash every regular file below ``directory`` (recursively, sorted) except the manifest and
    signature files. Raises ``bad_artifact`` on a symlink or special file."""
    root = Path(directory)
    if not root.is_dir():
        raise IntegrityError("bad_artifact", f"{root} is not a directory")
    files: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for rel, path in _walk(root):
        files[rel], sizes[rel] = _hash_file(path)
    manifest = Manifest(model=model, version=version, files=files, sizes=sizes)
    return Manifest.from_bytes(manifest.to_bytes())


def key_id(public_key: Ed25519PublicKey) -> str:
    """First 16 hex digits of the sha256 of the raw 32-byte public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


class TrustedKeys(Mapping[str, Ed25519PublicKey]):
    """An immutable mapping key id -> ed25519 public key: the keys whose signatures are accepted."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Ed25519PublicKey] = ()) -> None:
        self._keys: dict[str, Ed25519PublicKey] = {key_id(key): key for key in keys}

    def __getitem__(self, kid: str) -> Ed25519PublicKey:
        return self._keys[kid]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._keys))

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"TrustedKeys({sorted(self._keys)})"


def generate_keypair(private_path: Path | str, public_path: Path | str) -> str:
    """Write a new ed25519 key pair as PEM (private: PKCS8, unencrypted, mode 0600; public:
    SubjectPublicKeyInfo) and return its key id. Refuses to overwrite an existing private key
    (``FileExistsError``)."""
    private_key = Ed25519PrivateKey.generate()
    private_pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_file, public_file = Path(private_path), Path(public_path)
    private_file.parent.mkdir(parents=True, exist_ok=True)
    public_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
    public_file.write_bytes(public_pem)
    return key_id(private_key.public_key())


def load_private_key(path: Path | str) -> Ed25519PrivateKey:
    """Read an unencrypted PEM ed25519 private key; raises ``IntegrityError('bad_key')`` otherwise."""
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise IntegrityError("bad_key", f"cannot read private key {path}: {exc}", str(path)) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise IntegrityError("bad_key", f"{path} is not an ed25519 private key", str(path))
    return key


def _load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise IntegrityError("bad_key", f"cannot read public key {path}: {exc}", str(path)) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise IntegrityError("bad_key", f"{path} is not an ed25519 public key", str(path))
    return key


def load_trusted_keys(paths_or_dir: Path | str | Iterable[Path | str]) -> TrustedKeys:
    """Load PEM public keys from files, or from every ``*.pem``/``*.pub`` file of a directory.
    Raises ``IntegrityError('bad_key')`` on an unreadable or non-ed25519 key, or if none is found."""
    sources = [paths_or_dir] if isinstance(paths_or_dir, str | Path) else list(paths_or_dir)
    files: list[Path] = []
    for source in map(Path, sources):
        if source.is_dir():
            files.extend(sorted(p for p in source.iterdir() if p.is_file() and p.suffix in PUBLIC_KEY_SUFFIXES))
        else:
            files.append(source)
    if not files:
        raise IntegrityError("bad_key", f"no public keys found in {', '.join(map(str, sources)) or 'an empty list'}")
    return TrustedKeys(_load_public_key(path) for path in files)


class TrustedKeyDirectory:
    """The keys trusted now: the ``*.pem``/``*.pub`` files of ``directory``, read again whenever a
    file there is added, removed or rewritten, so that ``shunter keys generate --trust`` and
    ``shunter keys untrust`` take effect without restarting control. ``current()`` costs one
    directory listing and a ``stat`` per key file when nothing changed."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._seen: tuple[tuple[str, int, int], ...] | None = None
        self._keys = TrustedKeys()

    def _fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        if not self.directory.is_dir():
            return ()
        entries = []
        for path in sorted(self.directory.iterdir()):
            if path.is_file() and path.suffix in PUBLIC_KEY_SUFFIXES:
                stat = path.stat()
                entries.append((path.name, stat.st_mtime_ns, stat.st_size))
        return tuple(entries)

    def current(self) -> TrustedKeys:
        """The trusted keys as the directory holds them now; raises ``IntegrityError('bad_key')``
        as ``load_trusted_keys`` does (an unreadable key, or none at all)."""
        seen = self._fingerprint()
        if seen != self._seen:
            self._keys = load_trusted_keys(self.directory)
            self._seen = seen
        return self._keys


def sign_manifest(manifest: Manifest, private_key: Ed25519PrivateKey) -> bytes:
    """The signature file's content: canonical JSON of key id, algorithm and base64 signature
    over ``manifest.to_bytes()``."""
    signature = private_key.sign(manifest.to_bytes())
    body = {
        "key_id": key_id(private_key.public_key()),
        "algorithm": ALGORITHM,
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_signed_manifest(
    directory: Path | str, model: str, version: int, private_key: Ed25519PrivateKey
) -> Manifest:
    """Build the manifest of ``directory`` and write it and its signature beside the files."""
    root = Path(directory)
    manifest = build_manifest(root, model, version)
    _write_atomic(root / MANIFEST_NAME, manifest.to_bytes())
    _write_atomic(root / SIGNATURE_NAME, sign_manifest(manifest, private_key))
    return manifest


def _read_reserved(root: Path, name: str) -> bytes:
    path = root / name
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError as exc:
        raise IntegrityError("unsigned", f"{root} has no {name}: the artifact is not signed", name) from exc
    if not stat.S_ISREG(mode):
        raise IntegrityError("bad_artifact", f"{name} in {root} is not a regular file", name)
    with path.open("rb") as handle:
        data = handle.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise IntegrityError("bad_manifest", f"{name} in {root} is over {MAX_MANIFEST_BYTES} bytes", name)
    return data


def _parse_signature(data: bytes) -> tuple[str, bytes]:
    """(key id, raw signature) from a signature file; ``bad_signature`` if malformed."""
    try:
        body = json.loads(data.decode("utf-8"))
        if not isinstance(body, dict) or body.get("algorithm") != ALGORITHM:
            raise ValueError(f"algorithm must be {ALGORITHM!r}")
        kid, encoded = body["key_id"], body["signature"]
        if not isinstance(kid, str) or not isinstance(encoded, str):
            raise ValueError("key_id and signature must be strings")
        return kid, base64.b64decode(encoded, validate=True)
    except (UnicodeDecodeError, ValueError, KeyError, binascii.Error) as exc:
        raise IntegrityError("bad_signature", f"{SIGNATURE_NAME} is malformed: {exc}", SIGNATURE_NAME) from exc


def signer_key_id(directory: Path | str) -> str:
    """The key id named by the signature file of ``directory`` (read it after ``verify_directory``:
    this checks nothing). Raises ``IntegrityError`` if the file is missing or malformed."""
    return _parse_signature(_read_reserved(Path(directory), SIGNATURE_NAME))[0]


def manifest_digest(directory: Path | str) -> str:
    """``Manifest.digest()`` of the manifest file of ``directory``, read and parsed but not checked
    against the signature or the files. Raises ``IntegrityError`` if it is missing or malformed."""
    return Manifest.from_bytes(_read_reserved(Path(directory), MANIFEST_NAME)).digest()


def _check_signature(root: Path, trusted: TrustedKeys) -> bytes:
    """The manifest's bytes, once its signature is verified by a trusted key."""
    signature_data = _read_reserved(root, SIGNATURE_NAME)
    manifest_data = _read_reserved(root, MANIFEST_NAME)
    kid, signature = _parse_signature(signature_data)
    public_key = trusted.get(kid)
    if public_key is None:
        raise IntegrityError(
            "untrusted_key", f"{root} is signed by key {kid}, which is not among the trusted keys", SIGNATURE_NAME
        )
    try:
        public_key.verify(signature, manifest_data)
    except InvalidSignature as exc:
        raise IntegrityError(
            "bad_signature", f"the signature of {root / MANIFEST_NAME} by key {kid} does not verify", MANIFEST_NAME
        ) from exc
    return manifest_data


def _check_identity(manifest: Manifest, model: str | None, version: int | None) -> None:
    if (model is not None and manifest.model != model) or (version is not None and manifest.version != version):
        expected = f"{model if model is not None else manifest.model} v{version if version is not None else '*'}"
        found = f"{manifest.model} v{manifest.version}"
        raise IntegrityError("wrong_model", f"the manifest is for {found}, expected {expected}", MANIFEST_NAME)


def _check_files(root: Path, manifest: Manifest) -> None:
    present = dict(_walk(root))
    missing = sorted(set(manifest.files) - set(present))
    if missing:
        rel = missing[0]
        raise IntegrityError("missing_file", f"{rel} is listed in the manifest but missing from {root}", rel)
    unexpected = sorted(set(present) - set(manifest.files))
    if unexpected:
        rel = unexpected[0]
        raise IntegrityError("unexpected_file", f"{rel} is in {root} but not listed in the manifest", rel)
    for rel, path in present.items():
        digest, size = _hash_file(path)
        if size != manifest.sizes[rel]:
            raise IntegrityError(
                "size_mismatch", f"{rel} is {size} bytes, the manifest says {manifest.sizes[rel]}", rel
            )
        if digest != manifest.files[rel]:
            raise IntegrityError(
                "digest_mismatch", f"{rel} has sha256 {digest}, the manifest says {manifest.files[rel]}", rel
            )


def verify_directory(
    directory: Path | str, trusted: TrustedKeys, model: str | None = None, version: int | None = None
) -> Manifest:
    """Return the verified manifest of ``directory``, or raise ``IntegrityError`` (see module doc).
    ``model``/``version``, when given, must match the manifest's."""
    root = Path(directory)
    if not root.is_dir():
        raise IntegrityError("bad_artifact", f"{root} is not a directory")
    manifest = Manifest.from_bytes(_check_signature(root, trusted))
    _check_identity(manifest, model, version)
    _check_files(root, manifest)
    return manifest
