"""Fixtures shared by the control plane's unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import control.verified_copies
from control.integrity import Manifest


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories the verified-copy cache verified (the real verify_directory, counted)."""
    seen: list[Path] = []
    real = control.verified_copies.verify_directory

    def counted(directory: Path | str, *args: object, **kwargs: object) -> Manifest:
        seen.append(Path(directory))
        return real(directory, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(control.verified_copies, "verify_directory", counted)
    return seen
