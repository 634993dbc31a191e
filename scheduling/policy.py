"""The scheduling policies by name (``scheduling.scheduler`` re-exports it), importable without
the scheduler: ``shunter up --policy`` reads it at start-up."""

from __future__ import annotations

from enum import StrEnum


class Policy(StrEnum):
    FAIR = "fair"
    FIFO = "fifo"
