"""A bounded cache of deterministic per-row results (embedding vectors), private to each tenant.

Entries are keyed by (tenant, model, version, SHA-256 of the input), so a tenant only ever reads
rows its own requests computed: a cached result can never reach another tenant, whatever the
inputs, and a new model version never serves an old version's vectors. The least recently used
entries go first once ``max_entries`` is reached. Hand-written: the LRU is a few lines over
``OrderedDict``, and the libraries that offer one do not bound by entry with numpy values cheaply.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

Key = tuple[str, str, int, bytes]


class ResponseCache:
    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.max_entries = max_entries
        self._rows: OrderedDict[Key, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def _key(tenant: str, model: str, version: int, text: str) -> Key:
        return tenant, model, version, hashlib.sha256(text.encode("utf-8")).digest()

    def lookup(self, tenant: str, model: str, version: int, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached row for each text (None where the tenant has none)."""
        found: list[np.ndarray | None] = []
        for text in texts:
            key = self._key(tenant, model, version, text)
            row = self._rows.get(key)
            if row is not None:
                self._rows.move_to_end(key)
            found.append(row)
        return found

    def store(self, tenant: str, model: str, version: int, texts: Sequence[str], rows: np.ndarray) -> None:
        if self.max_entries == 0:
            return
        for text, row in zip(texts, rows, strict=True):
            self._rows[self._key(tenant, model, version, text)] = np.array(row, copy=True)
        while len(self._rows) > self.max_entries:
            self._rows.popitem(last=False)
