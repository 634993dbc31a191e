"""Prompt-prefix reuse: how much of a prompt an engine with a prefix cache will not prefill.

An engine with a prefix cache (the ``chat`` CPU engine; vLLM's automatic prefix caching)
prefills only the part of a new prompt past the longest prefix that its KV already holds: a free
slot's cells, or a copy of a running sequence's (``python_backends.chat.scheduler``). Chat traffic
shares long system prompts, so predicting every prompt at full length overstates the prefill
line, the start wait and the first token many times over, and admission refuses work the engine
would serve at once (``bench.shared_prefix``).

The driver describes each LLM prompt by the chain hashes of its leading blocks
(``PromptPrefixes``: hash ``i`` covers tokens ``[0, (i + 1) * block_tokens)``, so two prompts
share hash ``i`` exactly when they share those tokens). Per worker, model and version (versions
loaded side by side run engines of their own) the scheduler keeps a ``PrefixMemory``: the chains
of the last ``max_sequences`` prompts dispatched there, one per engine slot (a slot keeps the last
prompt it ran, running or finished, until another takes it).
Output tokens are not hashed, so a conversation's next turn (whose prompt holds the previous
answer) is predicted to reuse less than it does.

The prediction can be wrong both ways: a prompt dispatched while the one it shares with is still
prefilling copies only what is computed, and an engine restart empties the cache. Observed first
tokens correct the worker's prefill line all the same (``prefill_line.PrefillLine``). No
library fits: this models another process's cache from the outside.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

PREFIX_BLOCK_TOKENS = 16  # the chat engine's KV block: it reuses a prefix only from a block long


@dataclass(frozen=True)
class PromptPrefixes:
    """Chain hashes of a prompt's leading whole blocks of ``block_tokens`` tokens."""

    block_tokens: int
    hashes: tuple[int, ...]

    @staticmethod
    def of(tokens: Sequence[int], block_tokens: int = PREFIX_BLOCK_TOKENS) -> PromptPrefixes:
        """The chain over ``tokens`` (token ids): each hash folds in the previous one and one block."""
        if block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")
        hashes: list[int] = []
        chained = 0
        for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
            chained = hash((chained, tuple(tokens[start:start + block_tokens])))
            hashes.append(chained)
        return PromptPrefixes(block_tokens, tuple(hashes))


@dataclass
class PrefixMemory:
    """The prompt chains one engine's slots hold, oldest first (module docstring)."""

    chains: deque[tuple[int, ...]] = field(default_factory=deque)
    _held: dict[int, int] = field(default_factory=dict)  # hash -> number of chains holding it

    def _matched_blocks(self, hashes: tuple[int, ...]) -> int:
        """Leading blocks of ``hashes`` that some held chain shares. Chains make this monotone: a
        chain holding hash ``i`` holds every hash before it, so a binary search finds the end."""
        low, high = 0, len(hashes)
        while low < high:
            middle = (low + high + 1) // 2
            if hashes[middle - 1] in self._held:
                low = middle
            else:
                high = middle - 1
        return low

    def reusable_tokens(self, prefixes: PromptPrefixes | None, prompt_tokens: int) -> int:
        """Tokens of a ``prompt_tokens``-token prompt the engine would not prefill: the held prefix,
        never the whole prompt (the engine computes its last token to sample the first output)."""
        if prefixes is None or not self._held:
            return 0
        return max(0, min(self._matched_blocks(prefixes.hashes) * prefixes.block_tokens, prompt_tokens - 1))

    def remember(self, prefixes: PromptPrefixes | None, slots: int) -> None:
        """A prompt was dispatched: its slot now holds it; only the last ``slots`` prompts stay held."""
        if prefixes is not None and prefixes.hashes:
            self.chains.append(prefixes.hashes)
            for h in prefixes.hashes:
                self._held[h] = self._held.get(h, 0) + 1
        while len(self.chains) > max(0, slots):
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        for h in self.chains.popleft():
            left = self._held[h] - 1
            if left:
                self._held[h] = left
            else:
                del self._held[h]
