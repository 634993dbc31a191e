"""A signed copy of an artifact folder, made without writing into the folder itself.

``signed_copy(source, model, version, private_key)`` hard-links (or copies, across filesystems)
the folder's visible files into a temporary directory, writes the signed manifest there and yields
it with its manifest; the temporary directory is removed on exit. Both ``shunter models push`` and
control's bootstrap sign this way, so a push that is refused leaves the operator's folder as it was.
Subfolders are kept (hard-linked file by file); hidden entries (``.git``, editor files) are left out.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.integrity import Manifest, write_signed_manifest


def _link_tree(source: Path, target: Path) -> None:
    for item in sorted(source.iterdir()):
        if item.name.startswith("."):
            continue
        if item.is_dir():
            (target / item.name).mkdir()
            _link_tree(item, target / item.name)
        elif item.is_file():
            try:
                os.link(item, target / item.name)
            except OSError:
                shutil.copy2(item, target / item.name)


@contextmanager
def signed_copy(source: Path, model: str, version: int,
                private_key: Ed25519PrivateKey) -> Iterator[tuple[Path, Manifest]]:
    """Yield ``(folder, manifest)``: a signed copy of ``source`` that lives until the block ends."""
    with tempfile.TemporaryDirectory(prefix=f"push-{model}-") as tmp:
        staged = Path(tmp) / "artifact"
        staged.mkdir()
        _link_tree(source, staged)
        yield staged, write_signed_manifest(staged, model, version, private_key)
