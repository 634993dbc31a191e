"""The workload kinds, without pydantic: the CLI's options import this at start-up
(``settings.stack`` re-exports it with the configuration models)."""

from __future__ import annotations

from enum import StrEnum


class WorkloadKind(StrEnum):
    """What a model does; selects its Triton template and python backend."""

    LLM = "llm"
    EMBEDDING = "embedding"
    RERANK = "rerank"
    VISION = "vision"
    TABULAR = "tabular"
