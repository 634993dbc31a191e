"""Per-sequence token sampling from one logits row, with the sequence's own RNG.

``TokenSampler(params)`` owns a ``numpy.random.Generator`` seeded from ``params.seed`` only, and
``sample(row)`` reads nothing but that row: a sequence's tokens therefore depend on its prompt,
its parameters and its seed, never on which sequences share the batch. ``temperature == 0`` (or
``top_k == 1``) is greedy (arg max, lowest id on ties) and draws no random numbers.
"""

from __future__ import annotations

import numpy as np

from python_backends.chat.grammar import GrammarConstraint
from python_backends.chat.params import GenerationParams

_TOP_P_FIRST_TRY = 64  # candidates tried before a full sort when top_p < 1


class TokenSampler:
    def __init__(self, params: GenerationParams) -> None:
        self.temperature = params.temperature
        self.top_k = params.top_k
        self.top_p = params.top_p
        self._rng = np.random.default_rng(params.seed)

    def skip(self, tokens: int) -> None:
        """Advance past ``tokens`` earlier samples (a continuation): each non-greedy ``sample``
        draws exactly one number, so the next draw is the one the original sequence would have
        made next."""
        if not self.greedy and tokens > 0:
            self._rng.random(tokens)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    def sample(self, row: np.ndarray, constraint: GrammarConstraint | None = None) -> int:
        """One token id drawn from the logits ``row`` (shape ``(n_vocab,)``), among the tokens
        ``constraint`` allows next when there is one (see ``grammar``)."""
        if constraint is None:
            return self._draw(row)
        return self._draw(constraint.mask(row))

    def _draw(self, row: np.ndarray) -> int:
        if self.greedy:
            return int(np.argmax(row))
        ids = np.arange(row.shape[0]) if self.top_k <= 0 else _top_k_ids(row, self.top_k)
        logits = row[ids].astype(np.float64) / self.temperature
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        if self.top_p < 1.0:
            ids, probs = _nucleus(ids, probs, self.top_p)
        cumulative = np.cumsum(probs)
        index = int(np.searchsorted(cumulative, self._rng.random() * cumulative[-1], side="right"))
        return int(ids[min(index, len(ids) - 1)])


def _top_k_ids(row: np.ndarray, k: int) -> np.ndarray:
    if k >= row.shape[0]:
        return np.arange(row.shape[0])
    ids = np.argpartition(-row, k - 1)[:k]
    return np.sort(ids)


def _nucleus(ids: np.ndarray, probs: np.ndarray, top_p: float) -> tuple[np.ndarray, np.ndarray]:
    """The smallest most-probable set whose mass reaches ``top_p`` (ties by lower id)."""
    first = min(_TOP_P_FIRST_TRY, len(probs))
    order = np.argpartition(-probs, first - 1)[:first] if first < len(probs) else np.arange(len(probs))
    order = order[np.lexsort((ids[order], -probs[order]))]
    if probs[order].sum() < top_p and first < len(probs):
        order = np.lexsort((ids, -probs))
    cumulative = np.cumsum(probs[order])
    keep = int(np.searchsorted(cumulative, top_p, side="left")) + 1
    chosen = order[:keep]
    return ids[chosen], probs[chosen]
