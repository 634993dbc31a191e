"""Verified copies of artifact versions, addressed by manifest digest: download and verify once.

Layout. ``verified_dir/<manifest digest>/`` (``Manifest.digest()``, 64 hex digits) holds one
version exactly as it was verified, read-only: its files, ``shunter-manifest.json`` and
``shunter-manifest.sig``. Nothing else is written or recorded; the manifest names its model and
version, so one digest is one version of one model. A download in progress is a hidden sibling
(``.fetch-<model>-<version>-*``), never mistaken for a copy.

Contract. ``fetch(uri, model, version, digest=None)`` downloads the artifact at ``uri`` into a
hidden temporary directory, verifies it (``control.integrity.verify_directory``: a trusted key, a
good signature, the expected model and version, every file's size and sha256) and, when
``digest`` is given, that its manifest has that digest; then it renames the copy to its digest's
directory, atomically: a copy is whole and verified, or absent. Registering a version calls it
(the digest is learnt there). ``copy_of(record)`` stages a registered version: it returns
``verified_dir/<record.manifest_digest>/`` as it is when that directory's manifest has the
recorded digest (the manifest alone is read: no download, no file hashed), and otherwise fetches
with the recorded digest. Every refusal is an ``IntegrityError`` (a tampered file or a manifest
other than the recorded one: ``digest_mismatch``, naming both digests), every store failure an
``ArtifactStoreError``; neither leaves anything behind.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from control.artifacts import ArtifactStore
from control.integrity import (
    IntegrityError,
    Manifest,
    TrustedKeyDirectory,
    manifest_digest,
    signer_key_id,
    verify_directory,
)
from control.registry import VersionRecord

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


@dataclass(frozen=True)
class VerifiedCopy:
    """A version's verified files, and what registering it records."""

    path: Path
    manifest: Manifest
    signer_key_id: str

    @property
    def digest(self) -> str:
        return self.manifest.digest()


class VerifiedCopies:
    """The verified-copy cache under ``root``; see the module docstring."""

    def __init__(self, root: Path, store: ArtifactStore, trusted: TrustedKeyDirectory) -> None:
        self.root = Path(root)
        self.store = store
        self.trusted = trusted

    def fetch(self, uri: str, model: str, version: int, digest: str | None = None) -> VerifiedCopy:
        """Download ``model`` v``version`` from ``uri``, verify it (and, when given, that its
        manifest has ``digest``) and move it into its digest's directory."""
        self.root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".fetch-{model}-{version}-", dir=self.root))
        try:
            files = staging / "files"
            self.store.download(uri, files)
            manifest = verify_directory(files, self.trusted.current(), model, version)
            if digest is not None and manifest.digest() != digest:
                raise IntegrityError("digest_mismatch", f"{uri} holds manifest {manifest.digest()}, but the "
                                                        f"registry recorded {digest} for {model} v{version}")
            key = signer_key_id(files)
            path = self._place(files, manifest.digest(), staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return VerifiedCopy(path, manifest, key)

    def copy_of(self, record: VersionRecord) -> Path:
        """The verified directory of a registered version: the one already verified for its
        recorded manifest digest, else one fetched now and checked against that digest."""
        digest = record.manifest_digest
        if not _DIGEST.match(digest):
            raise IntegrityError("bad_manifest", f"the registry records {digest!r} as the manifest digest of "
                                                 f"{record.model} v{record.version}, not a sha256 hex digest")
        if self._holds(self.root / digest, digest):
            return self.root / digest
        return self.fetch(record.artifact_uri, record.model, record.version, digest).path

    def digests(self) -> set[str]:
        """The manifest digests that have a copy here."""
        if not self.root.is_dir():
            return set()
        return {p.name for p in self.root.iterdir() if p.is_dir() and _DIGEST.match(p.name)}

    def remove(self, digest: str) -> int:
        """Delete the copy of ``digest`` (renamed aside first, so it is whole or absent); the bytes freed."""
        if not _DIGEST.match(digest) or not (self.root / digest).is_dir():
            return 0
        doomed = Path(tempfile.mkdtemp(prefix=".remove-", dir=self.root))
        os.rename(self.root / digest, doomed / digest)
        freed = sum(p.stat().st_size for p in doomed.rglob("*") if p.is_file())
        shutil.rmtree(doomed, ignore_errors=True)
        return freed

    @staticmethod
    def _holds(path: Path, digest: str) -> bool:
        """Whether ``path`` is a copy whose manifest has ``digest`` (the manifest alone is read)."""
        if not path.is_dir():
            return False
        try:
            return manifest_digest(path) == digest
        except IntegrityError:
            return False

    def _place(self, files: Path, digest: str, staging: Path) -> Path:
        """Rename the verified ``files`` to ``root/digest`` (read-only); keep an intact copy that is
        already there, replace a broken one."""
        for path in files.rglob("*"):
            if path.is_file():
                path.chmod(_READ_ONLY)
        final = self.root / digest
        try:
            os.rename(files, final)
        except OSError:
            if self._holds(final, digest):
                return final  # the same version was verified meanwhile
            final.rename(staging / "broken")  # removed with ``staging``
            os.rename(files, final)
        return final
